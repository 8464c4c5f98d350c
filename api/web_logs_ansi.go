package api

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// ANSI colours in build logs, rendered safely: a line is cut into spans of
// plain text, each with CSS classes from a fixed set (ansiClass). The text
// reaches the page only as text (html/template escapes it, log.js sets
// textContent), and an escape sequence can only pick among those classes:
// SGR codes (colours, bold, faint, italic, underline) map to classes,
// every other escape or control sequence is dropped.

// ansiSpan is a run of text with one look.
type ansiSpan struct {
	Text  string `json:"t"`
	Class string `json:"c,omitempty"`
}

// ansiState is the look in effect; it carries from line to line.
type ansiState struct {
	fg, bg                         int // 0: default; 1..16: palette index + 1
	bold, faint, italic, underline bool
}

// class is the state's CSS classes ("" for the default look).
func (s ansiState) class() string {
	var c []string
	if s.fg > 0 {
		c = append(c, "a-f"+strconv.Itoa(s.fg-1))
	}
	if s.bg > 0 {
		c = append(c, "a-b"+strconv.Itoa(s.bg-1))
	}
	if s.bold {
		c = append(c, "a-bold")
	}
	if s.faint {
		c = append(c, "a-faint")
	}
	if s.italic {
		c = append(c, "a-italic")
	}
	if s.underline {
		c = append(c, "a-under")
	}
	return strings.Join(c, " ")
}

// sgr applies one Select Graphic Rendition sequence's parameters.
func (s *ansiState) sgr(params string) {
	if params == "" {
		*s = ansiState{}
		return
	}
	ps := strings.FieldsFunc(params, func(r rune) bool { return r == ';' || r == ':' })
	for i := 0; i < len(ps); i++ {
		n, err := strconv.Atoi(ps[i])
		if err != nil {
			continue
		}
		switch {
		case n == 0:
			*s = ansiState{}
		case n == 1:
			s.bold = true
		case n == 2:
			s.faint = true
		case n == 3:
			s.italic = true
		case n == 4:
			s.underline = true
		case n == 22:
			s.bold, s.faint = false, false
		case n == 23:
			s.italic = false
		case n == 24:
			s.underline = false
		case n >= 30 && n <= 37:
			s.fg = n - 30 + 1
		case n == 39:
			s.fg = 0
		case n >= 40 && n <= 47:
			s.bg = n - 40 + 1
		case n == 49:
			s.bg = 0
		case n >= 90 && n <= 97:
			s.fg = n - 90 + 8 + 1
		case n >= 100 && n <= 107:
			s.bg = n - 100 + 8 + 1
		case n == 38 || n == 48:
			// 38;5;N (the 16 colours of the palette; others ignored) or
			// 38;2;R;G;B (ignored: no inline styles).
			if i+1 < len(ps) && ps[i+1] == "5" && i+2 < len(ps) {
				if c, err := strconv.Atoi(ps[i+2]); err == nil && c >= 0 && c < 16 {
					if n == 38 {
						s.fg = c + 1
					} else {
						s.bg = c + 1
					}
				}
				i += 2
			} else if i+1 < len(ps) && ps[i+1] == "2" {
				i += 4
			}
		}
	}
}

// ansiLine cuts one log line into spans, starting in state st and leaving
// st as the line ends. A carriage return starts the line over (a progress
// bar shows its last state); other control characters but tabs are
// dropped, and invalid UTF-8 becomes U+FFFD.
func ansiLine(line []byte, st *ansiState) []ansiSpan {
	var spans []ansiSpan
	var cur strings.Builder
	flush := func() {
		if cur.Len() == 0 {
			return
		}
		cls := st.class()
		if n := len(spans); n > 0 && spans[n-1].Class == cls {
			spans[n-1].Text += cur.String()
		} else {
			spans = append(spans, ansiSpan{Text: cur.String(), Class: cls})
		}
		cur.Reset()
	}
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == 0x1b:
			flush()
			i = ansiEscape(line, i, st)
		case c == '\r':
			if i+1 == len(line) {
				i++
				continue // CRLF line end
			}
			cur.Reset()
			spans = spans[:0]
			i++
		case c == '\t':
			cur.WriteByte(c)
			i++
		case c < 0x20 || c == 0x7f:
			i++
		default:
			r, size := utf8.DecodeRune(line[i:])
			cur.WriteRune(r) // RuneError for invalid bytes
			i += size
		}
	}
	flush()
	return spans
}

// ansiEscape consumes the escape sequence at line[i] (ESC), applying an
// SGR to st, and returns where the text goes on.
func ansiEscape(line []byte, i int, st *ansiState) int {
	if i+1 >= len(line) {
		return len(line)
	}
	switch line[i+1] {
	case '[': // CSI: parameters, intermediates, one final byte
		j := i + 2
		for j < len(line) && line[j] >= 0x30 && line[j] <= 0x3f {
			j++
		}
		params := string(line[i+2 : j])
		for j < len(line) && line[j] >= 0x20 && line[j] <= 0x2f {
			j++
		}
		if j >= len(line) {
			return len(line)
		}
		if line[j] == 'm' {
			st.sgr(params)
		}
		return j + 1
	case ']': // OSC (titles, hyperlinks): up to BEL or ST
		for j := i + 2; j < len(line); j++ {
			if line[j] == 0x07 {
				return j + 1
			}
			if line[j] == 0x1b && j+1 < len(line) && line[j+1] == '\\' {
				return j + 2
			}
		}
		return len(line)
	default: // a two-byte escape
		return i + 2
	}
}

// ansiPlain is the text of a line as shown, for search.
func ansiPlain(line []byte) string {
	var st ansiState
	var b strings.Builder
	for _, sp := range ansiLine(line, &st) {
		b.WriteString(sp.Text)
	}
	return b.String()
}
