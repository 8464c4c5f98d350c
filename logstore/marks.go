package logstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"time"
)

// Line marks: when each line of a step log was written.
//
// Next to <step>.log the store keeps <step>.times, a sequence of fixed-size
// records, one per append (an append in the same millisecond as the last
// record adds none): the offset where the append started, the number of
// newlines before that offset, and the time of the append in Unix
// milliseconds, each a little-endian int64. A line was written at the time
// of the record with the greatest offset not after the line's first byte.
// The log file itself stays the bytes written, so a raw download is the
// log as the steps printed it.
//
// A log created before marks existed has no .times file and keeps none:
// its lines have no times, and line numbers are counted from its start.

// markSize is the size of one record in a .times file.
const markSize = 24

// Mark says that the bytes of a step log from Offset on were written at
// Time, and that Line newlines come before Offset.
type Mark struct {
	Offset int64     `json:"offset"`
	Line   int64     `json:"line"`
	Time   time.Time `json:"time"`
}

func (m Mark) encode() []byte {
	var b [markSize]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(m.Offset))            //nolint:gosec // G115: offsets are non-negative
	binary.LittleEndian.PutUint64(b[8:], uint64(m.Line))              //nolint:gosec // G115: counts are non-negative
	binary.LittleEndian.PutUint64(b[16:], uint64(m.Time.UnixMilli())) //nolint:gosec // G115: times after 1970
	return b[:]
}

// decodeMarks parses a .times file; a torn record at the end (a writer
// died mid-write) is ignored.
func decodeMarks(data []byte) []Mark {
	out := make([]Mark, 0, len(data)/markSize)
	for i := 0; i+markSize <= len(data); i += markSize {
		out = append(out, Mark{
			Offset: int64(binary.LittleEndian.Uint64(data[i:])),                          //nolint:gosec // G115: written from non-negative values
			Line:   int64(binary.LittleEndian.Uint64(data[i+8:])),                        //nolint:gosec // G115: as above
			Time:   time.UnixMilli(int64(binary.LittleEndian.Uint64(data[i+16:]))).UTC(), //nolint:gosec // G115: as above
		})
	}
	return out
}

// mark records that an append starts at offset (the log's size before it)
// at time now. It runs under the log file's lock, after the bytes were
// written. A log that was not empty when its first mark would be written
// (created by an older sluice) gets none.
func mark(sp stepPaths, offset int64, now time.Time) error {
	f, err := os.OpenFile(sp.times, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if offset != 0 {
			return nil
		}
		f, err = os.OpenFile(sp.times, os.O_RDWR|os.O_CREATE, 0o640) //nolint:gosec // G302: as the log beside it
	}
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	size, err := fileSize(f)
	if err != nil {
		return err
	}
	size -= size % markSize // drop a torn record
	m := Mark{Offset: offset, Time: now}
	if size >= markSize {
		var b [markSize]byte
		if _, err := f.ReadAt(b[:], size-markSize); err != nil {
			return err
		}
		last := decodeMarks(b[:])[0]
		if last.Time.UnixMilli() == now.UnixMilli() || last.Offset >= offset {
			return nil // same millisecond: the last record covers these bytes
		}
		n, err := countNewlines(sp.log, last.Offset, offset)
		if err != nil {
			return err
		}
		m.Line = last.Line + n
	}
	_, err = f.WriteAt(m.encode(), size)
	return err
}

// countNewlines counts the newlines in [from, to) of a file.
func countNewlines(path string, from, to int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	var n int64
	buf := make([]byte, 64<<10)
	for off := from; off < to; {
		k := min(int64(len(buf)), to-off)
		got, err := f.ReadAt(buf[:k], off)
		n += int64(bytes.Count(buf[:got], []byte{'\n'}))
		off += int64(got)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return 0, err
		}
	}
	return n, nil
}

// Marks returns the step log's marks in offset order; nil (and no error)
// for a log written before marks existed.
//
//nolint:contextcheck // blob store lookups are bounded by archiveTimeout
func (s *Store) Marks(build, step string) ([]Mark, error) {
	sp, err := s.paths(build, step)
	if err != nil {
		return nil, fmt.Errorf("read log marks: %w", err)
	}
	data, err := os.ReadFile(sp.times)
	if err == nil {
		return decodeMarks(data), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read log marks %s/%s: %w", build, step, err)
	}
	if exists(sp.log) {
		return nil, nil // an old log, or one whose marks are not written yet
	}
	if s.archive != nil {
		ms, err := s.remoteMarks(build, step)
		if err == nil || !isNotFound(err) {
			return ms, err
		}
	}
	return nil, fmt.Errorf("read log marks %s/%s: %w", build, step, ErrNotFound)
}

// markAt returns the mark covering offset: the last whose Offset is not
// after it (ok false when there is none).
func markAt(ms []Mark, offset int64) (Mark, bool) {
	i := sort.Search(len(ms), func(i int) bool { return ms[i].Offset > offset })
	if i == 0 {
		return Mark{}, false
	}
	return ms[i-1], true
}
