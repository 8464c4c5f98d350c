package api

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ANSI colours become CSS classes from a fixed set; every other escape or
// control sequence is dropped, and the text stays text.
func TestANSILinesBecomeSafeSpans(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []ansiSpan
	}{
		{"plain", "hello", []ansiSpan{{Text: "hello"}}},
		{"colour and reset", "\x1b[31mred\x1b[0m plain", []ansiSpan{{Text: "red", Class: "a-f1"}, {Text: " plain"}}},
		{"bold bright on background", "\x1b[1;92;44mok", []ansiSpan{{Text: "ok", Class: "a-f10 a-b4 a-bold"}}},
		{"256 palette and true colour", "\x1b[38;5;3ma\x1b[38;2;1;2;3mb\x1b[39mc", []ansiSpan{{Text: "ab", Class: "a-f3"}, {Text: "c"}}},
		{"cursor moves and titles dropped", "\x1b[2K\x1b]0;title\x07x\x1b]8;;http://e\x1b\\y", []ansiSpan{{Text: "xy"}}},
		{"a class cannot be chosen", "\x1b[31;\"><script>m<b>", []ansiSpan{{Text: "<script>m<b>"}}},
		{"markup stays text", "<img src=x onerror=alert(1)>", []ansiSpan{{Text: "<img src=x onerror=alert(1)>"}}},
		{"carriage return starts over", "10%\r50%\r100%\r", []ansiSpan{{Text: "100%"}}},
		{"controls dropped, tabs kept", "a\x00\x08\tb", []ansiSpan{{Text: "a\tb"}}},
		{"invalid UTF-8", "a\xffb", []ansiSpan{{Text: "a\uFFFDb"}}},
		{"cut escape", "x\x1b[3", []ansiSpan{{Text: "x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st ansiState
			require.Equal(t, tt.want, ansiLine([]byte(tt.in), &st))
		})
	}
	// The look carries to the next line.
	var st ansiState
	ansiLine([]byte("\x1b[33mstart"), &st)
	require.Equal(t, []ansiSpan{{Text: "more", Class: "a-f3"}}, ansiLine([]byte("more"), &st))
	require.Equal(t, "redplain", ansiPlain([]byte("\x1b[31mred\x1b[0mplain")))
}

// The viewer's template escapes log text and puts only the fixed classes
// in attributes.
func TestLogViewerTemplateEscapes(t *testing.T) {
	t.Parallel()
	var st ansiState
	v := &logView{Base: "/ui/builds/app/test/1", Steps: []logStep{{
		Index: 1, Name: `st"ep<x>`, Open: true,
		Page: logPage{Step: `st"ep<x>`, Lines: []logLine{
			{N: 1, Off: 0, Time: "03:04:05", ISO: "2030-01-02T03:04:05.000Z", Spans: ansiLine([]byte("\x1b[31m<script>alert(1)</script>"), &st)},
		}},
	}}}
	var b strings.Builder
	require.NoError(t, webTemplates.ExecuteTemplate(&b, "logviewer", v))
	out := b.String()
	require.NotContains(t, out, "<script>alert")
	require.Contains(t, out, `<span class="a-f1">&lt;script&gt;alert(1)&lt;/script&gt;</span>`)
	require.Contains(t, out, `id="L1-1"`)
	require.Contains(t, out, `<a class="ln" href="#L1-1">1</a>`)
	require.Contains(t, out, `<time datetime="2030-01-02T03:04:05.000Z"`)
	require.Contains(t, out, `href="/ui/builds/app/test/1/log/st%22ep%3Cx%3E/raw"`)
	require.Contains(t, out, `data-step="st&#34;ep&lt;x&gt;"`)
}
