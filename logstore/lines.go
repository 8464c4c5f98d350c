package logstore

import (
	"bytes"
	"fmt"
	"sort"
	"time"
)

// MaxPageBytes caps the bytes one page of lines covers.
const MaxPageBytes = 4 << 20

// Line is one line of a step log, as a page of lines shows it.
type Line struct {
	// Number counts the step's lines from 1. A line longer than a page
	// comes in pieces that share its number.
	Number int64 `json:"n"`
	// Offset is where the line (or this piece of it) starts in the log.
	Offset int64 `json:"offset"`
	// Time is when its first byte was written; zero for logs written
	// before sluice marked times.
	Time time.Time `json:"time,omitzero"`
	// Text is the line without its newline.
	Text []byte `json:"-"`
	// Partial is true for the last line of a live log that has no newline
	// yet: it is read again (and may have grown) from Offset.
	Partial bool `json:"partial,omitempty"`
}

// LinePage is a run of whole lines of a step log.
type LinePage struct {
	Lines []Line `json:"lines"`
	// Start is the offset of the first line; reading the page before
	// this one ends here.
	Start int64 `json:"start"`
	// Next is where the next page starts: after the last whole line (a
	// partial line is read again).
	Next int64 `json:"next"`
	// Size is the log's size when read; Complete is true once finished.
	Size     int64 `json:"size"`
	Complete bool  `json:"complete"`
}

// ReadLines reads the lines that start in [from, from+maxBytes) of a step
// log (maxBytes ≤ 0 or over MaxPageBytes means MaxPageBytes), with their
// numbers and times. A from inside a line starts with the rest of it.
func (s *Store) ReadLines(build, step string, from int64, maxBytes int64) (LinePage, error) {
	if maxBytes <= 0 || maxBytes > MaxPageBytes {
		maxBytes = MaxPageBytes
	}
	data, size, complete, err := s.readRange(build, step, from, from+maxBytes)
	if err != nil {
		return LinePage{}, err
	}
	marks, err := s.Marks(build, step)
	if err != nil {
		return LinePage{}, err
	}
	before, err := s.newlinesBefore(build, step, marks, from)
	if err != nil {
		return LinePage{}, err
	}
	pg := LinePage{Start: from, Next: from, Size: size, Complete: complete, Lines: []Line{}}
	end := from + int64(len(data))
	n := before + 1
	for off := int64(0); off < int64(len(data)); {
		i := bytes.IndexByte(data[off:], '\n')
		at := from + off
		line := Line{Number: n, Offset: at}
		if m, ok := markAt(marks, at); ok {
			line.Time = m.Time
		}
		if i < 0 {
			rest := data[off:]
			switch {
			case end == size && complete:
				// The log's last line, without a newline: whole.
				line.Text = rest
				pg.Lines = append(pg.Lines, line)
				pg.Next = end
			case end == size:
				// Live: the line may grow; read it again from at.
				line.Text, line.Partial = rest, true
				pg.Lines = append(pg.Lines, line)
			case off == 0:
				// One line longer than the page: this piece of it.
				line.Text = rest
				pg.Lines = append(pg.Lines, line)
				pg.Next = end
			}
			break
		}
		line.Text = data[off : off+int64(i)]
		pg.Lines = append(pg.Lines, line)
		off += int64(i) + 1
		pg.Next = from + off
		n++
	}
	return pg, nil
}

// LinesBefore reads the whole lines that end in the maxBytes before
// before (before < 0: the end of the log), for paging backwards: the last
// page of a log is LinesBefore(…, -1, …).
func (s *Store) LinesBefore(build, step string, before, maxBytes int64) (LinePage, error) {
	if maxBytes <= 0 || maxBytes > MaxPageBytes {
		maxBytes = MaxPageBytes
	}
	if before < 0 {
		info, err := s.Stat(build, step)
		if err != nil {
			return LinePage{}, err
		}
		before = info.Size
	}
	start := max(before-maxBytes, 0)
	if start > 0 {
		data, _, _, err := s.readRange(build, step, start-1, before)
		if err != nil {
			return LinePage{}, err
		}
		// Start at a line's start: after the first newline (the byte
		// before start counts), unless one line fills the range.
		if i := bytes.IndexByte(data, '\n'); i >= 0 && start-1+int64(i)+1 < before {
			start = start - 1 + int64(i) + 1
		}
	}
	if start == before {
		_, size, complete, err := s.readRange(build, step, before, before)
		if err != nil {
			return LinePage{}, err
		}
		return LinePage{Lines: []Line{}, Start: before, Next: before, Size: size, Complete: complete}, nil
	}
	return s.ReadLines(build, step, start, before-start)
}

// LineOffset returns the offset where line n (from 1) of a step log
// starts; a line past the end is ErrBadOffset.
func (s *Store) LineOffset(build, step string, n int64) (int64, error) {
	if n < 1 {
		return 0, fmt.Errorf("find line %d of log %s/%s: %w: lines count from 1", n, build, step, ErrBadOffset)
	}
	if n == 1 {
		return 0, nil
	}
	marks, err := s.Marks(build, step)
	if err != nil {
		return 0, err
	}
	// The last mark with fewer than n-1 newlines before it: line n starts
	// after the (n-1)th newline, which comes after that mark.
	var from, seen int64
	if i := sort.Search(len(marks), func(i int) bool { return marks[i].Line >= n-1 }); i > 0 {
		from, seen = marks[i-1].Offset, marks[i-1].Line
	}
	for {
		data, size, _, err := s.readRange(build, step, from, from+MaxReadLength)
		if err != nil {
			return 0, err
		}
		for off := 0; off < len(data); {
			i := bytes.IndexByte(data[off:], '\n')
			if i < 0 {
				break
			}
			off += i + 1
			seen++
			if seen == n-1 {
				at := from + int64(off)
				if at == size {
					return 0, fmt.Errorf("find line %d of log %s/%s: %w: the log has %d lines", n, build, step, ErrBadOffset, seen)
				}
				return at, nil
			}
		}
		from += int64(len(data))
		if from >= size {
			return 0, fmt.Errorf("find line %d of log %s/%s: %w: the log has fewer lines", n, build, step, ErrBadOffset)
		}
	}
}

// newlinesBefore counts the newlines before offset, from the last mark
// before it (or from the start of a log without marks).
func (s *Store) newlinesBefore(build, step string, marks []Mark, offset int64) (int64, error) {
	var from, n int64
	if m, ok := markAt(marks, offset); ok {
		from, n = m.Offset, m.Line
	}
	for from < offset {
		data, _, _, err := s.readRange(build, step, from, offset)
		if err != nil {
			return 0, err
		}
		if len(data) == 0 {
			break
		}
		n += int64(bytes.Count(data, []byte{'\n'}))
		from += int64(len(data))
	}
	return n, nil
}

// readRange reads [from, to) of a step log, or less at its end, with the
// log's size and completion at the first read.
func (s *Store) readRange(build, step string, from, to int64) ([]byte, int64, bool, error) {
	c, err := s.Read(build, step, from, max(to-from, 1))
	if err != nil {
		return nil, 0, false, err
	}
	size, complete := c.Size, c.Complete
	to = min(to, size)
	if from >= to {
		return nil, size, complete, nil
	}
	out := c.Data
	for from = c.NextOffset; from < to && len(c.Data) > 0; from = c.NextOffset {
		if c, err = s.Read(build, step, from, to-from); err != nil {
			return nil, 0, false, err
		}
		out = append(out, c.Data...)
	}
	return out, size, complete, nil
}
