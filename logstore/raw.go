package logstore

import (
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// ServeRaw sends a step log as stored, the bytes the step wrote (no times,
// no escaping), as a text file to download named filename. A live log is
// sent up to its size when asked. An error before the first byte is
// returned for the caller to answer; one later cuts the body short.
func ServeRaw(w http.ResponseWriter, r *http.Request, s *Store, build, step, filename string) error {
	c, err := s.Read(build, step, 0, 0)
	if err != nil {
		return err
	}
	size := c.Size
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filename}))
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	if !c.Complete {
		h.Set("Cache-Control", "no-store")
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	for {
		n := min(int64(len(c.Data)), size-c.Offset)
		if _, err := w.Write(c.Data[:n]); err != nil {
			return nil //nolint:nilerr // the client left: nothing to answer
		}
		if c.Offset+n >= size {
			return nil
		}
		next := c.Offset + n
		if c, err = s.Read(build, step, next, size-next); err != nil || len(c.Data) == 0 {
			panic(http.ErrAbortHandler) // cut short: the length says so
		}
	}
}

// RawName is the file name a raw download of a step log suggests: the
// build and step with every byte outside [A-Za-z0-9._-] as '-'.
func RawName(build, step string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, build+"-"+step) + ".log"
}
