package scm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// CommitFileReader is implemented by repositories that read a commit's
// description and one of its files together (git: one process instead of
// the five CommitOf and ReadFile take one after the other).
type CommitFileReader interface {
	// ReadCommitFile is ReadFile(ctx, sha, path), with what CommitOf would
	// say of sha; the commit is nil when it cannot be described (the file
	// is still read).
	ReadCommitFile(ctx context.Context, sha, path string) (*Commit, []byte, error)
}

var _ CommitFileReader = (*gitRepo)(nil)

// maxCommitObject bounds how much of a commit object is kept (its headers
// and the start of its message; CommitOf cuts messages far shorter).
const maxCommitObject = 1 << 20

// errBatchUnsupported is a cat-file session that could not answer at all
// (git older than 2.36 has no --batch-command): the caller reads the
// commit and the file the slower way.
var errBatchUnsupported = errors.New("git cat-file --batch-command did not answer")

// ReadCommitFile implements CommitFileReader: one `git cat-file
// --batch-command` answers the commit object, the file's type and size,
// then its content; a commit the mirror lacks is fetched first, as
// ReadFile does.
func (r *gitRepo) ReadCommitFile(ctx context.Context, sha, p string) (*Commit, []byte, error) {
	clean, err := cleanRepoPath(p)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s at %s in %s: %w", p, sha, r.display, err)
	}
	if !hexSHA.MatchString(sha) {
		// ensureCommit words the error.
		_, err := r.ensureCommit(ctx, sha)
		return nil, nil, fmt.Errorf("read %s at %s in %s: %w", clean, sha, r.display, err)
	}
	c, data, found, err := r.catCommitFile(ctx, sha, clean)
	if err == nil && !found {
		full, ferr := r.ensureCommit(ctx, sha) // fetches what the mirror lacks
		if ferr != nil {
			return nil, nil, fmt.Errorf("read %s at %s in %s: %w", clean, sha, r.display, ferr)
		}
		c, data, found, err = r.catCommitFile(ctx, full, clean)
		if err == nil && !found {
			err = fmt.Errorf("%w: commit %s vanished from the mirror", ErrNotFound, full)
		}
	}
	if errors.Is(err, errBatchUnsupported) {
		return r.readCommitFileApart(ctx, sha, clean)
	}
	if err != nil {
		return c, nil, fmt.Errorf("read %s at %s in %s: %w", clean, sha, r.display, err)
	}
	return c, data, nil
}

// readCommitFileApart is ReadCommitFile with CommitOf and ReadFile.
func (r *gitRepo) readCommitFileApart(ctx context.Context, sha, p string) (*Commit, []byte, error) {
	var c *Commit
	if got, err := r.CommitOf(ctx, sha); err == nil {
		c = &got
	}
	data, err := r.ReadFile(ctx, sha, p)
	return c, data, err
}

// catCommitFile asks one cat-file session for the commit sha names and
// the file at p in it; found is false when the mirror has no such commit.
// The commit is nil when its object says something parseRawCommit does not
// read as `git show` would (a legacy encoding): CommitOf reads it then.
func (r *gitRepo) catCommitFile(ctx context.Context, sha, p string) (c *Commit, data []byte, found bool, err error) {
	s, err := takeCatFile(ctx, r.mirror)
	if err != nil {
		return nil, nil, false, err
	}
	defer func() { err = s.release(err) }()
	header, raw, err := s.contents(sha+"^{commit}", maxCommitObject)
	switch {
	case err != nil:
		return nil, nil, false, err
	case strings.HasSuffix(header, " missing") || strings.HasSuffix(header, " ambiguous"):
		return nil, nil, false, nil
	}
	fields := strings.Fields(header)
	if len(fields) != 3 || fields[1] != "commit" {
		return nil, nil, false, fmt.Errorf("unexpected git cat-file output %q", header)
	}
	full := fields[0]
	if got, ok := parseRawCommit(raw); ok {
		c = &got
	} else if got, err := r.CommitOf(ctx, full); err == nil {
		c = &got
	}
	object := full + ":" + p
	info, err := s.info(object)
	if err != nil {
		return c, nil, true, err
	}
	if _, err := parseCatFileHeader([]byte(info)); err != nil {
		return c, nil, true, err
	}
	header, data, err = s.contents(object, MaxFileBytes)
	if err != nil {
		return c, nil, true, err
	}
	if _, err := parseCatFileHeader([]byte(header)); err != nil {
		return c, nil, true, err
	}
	return c, data, true, nil
}

// catFile is a `git cat-file --batch-command --follow-symlinks` session on
// one repository: each question is answered before the next is asked. A
// session outlives the read that started it (catfile_pool.go); ctx is the
// read that uses it now.
type catFile struct {
	ctx    context.Context
	dir    string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer
	// stop ends the watch that kills the session when ctx ends.
	stop func() bool
	// idle closes a kept session that nobody took again in time.
	idle *time.Timer
	// dirInfo is dir's when the session started (os.SameFile).
	dirInfo os.FileInfo
}

func startCatFile(ctx context.Context, dir string) (*catFile, error) {
	args := append(append([]string{}, gitOptions...), "cat-file", "--batch-command", "--follow-symlinks")
	// Not ended with the read's context: the session is kept for later
	// reads. A read whose context ends kills it (takeCatFile).
	cmd := exec.CommandContext(context.WithoutCancel(ctx), "git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	cmd.WaitDelay = 5 * time.Second
	info, err := os.Stat(dir)
	if err != nil {
		return nil, &gitError{cmd: "cat-file", err: err}
	}
	s := &catFile{dir: dir, cmd: cmd, dirInfo: info}
	cmd.Stderr = &s.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, &gitError{cmd: "cat-file", err: err}
	}
	s.stdin, s.stdout = in, bufio.NewReader(out)
	return s, nil
}

// ask sends one command and reads the answer's header line.
func (s *catFile) ask(command, object string) (string, error) {
	if _, err := io.WriteString(s.stdin, command+" "+object+"\n"); err != nil {
		return "", s.broken(err)
	}
	line, err := s.stdout.ReadString('\n')
	if err != nil {
		return "", s.broken(err)
	}
	return strings.TrimSuffix(line, "\n"), nil
}

// info answers "<oid> <type> <size>", or "<object> missing", or a
// symbolic link's answer (see parseCatFileHeader).
func (s *catFile) info(object string) (string, error) {
	return s.ask("info", object)
}

// contents answers the header and up to limit bytes of the object's
// content (the rest is read and dropped).
func (s *catFile) contents(object string, limit int) (string, []byte, error) {
	header, err := s.ask("contents", object)
	if err != nil {
		return "", nil, err
	}
	fields := strings.Fields(header)
	if len(fields) < 2 || fields[len(fields)-1] == "missing" || fields[len(fields)-1] == "ambiguous" {
		return header, nil, nil
	}
	size, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
	if err != nil || size < 0 {
		return "", nil, fmt.Errorf("unexpected git cat-file output %q", header)
	}
	keep := min(size, int64(limit))
	body := make([]byte, keep)
	if _, err := io.ReadFull(s.stdout, body); err != nil {
		return "", nil, s.broken(err)
	}
	// The rest, and the newline that ends every answer.
	if _, err := io.CopyN(io.Discard, s.stdout, size-keep+1); err != nil {
		return "", nil, s.broken(err)
	}
	return header, body, nil
}

// broken is the error of a session that stopped answering: git's own
// error when it said one, errBatchUnsupported when it printed nothing (a
// git without --batch-command exits at once).
func (s *catFile) broken(err error) error {
	_ = s.stdin.Close()
	werr := s.cmd.Wait()
	s.cmd = nil
	stderr := trimStderr(s.stderr.String())
	if werr != nil && strings.Contains(stderr, "batch-command") {
		return fmt.Errorf("%w: %s", errBatchUnsupported, stderr)
	}
	if ctxErr := s.ctx.Err(); ctxErr != nil {
		err = errors.Join(ctxErr, err)
	}
	return &gitError{cmd: "cat-file", err: errors.Join(err, werr), stderr: stderr}
}

// close ends the session.
func (s *catFile) close() error {
	if s.cmd == nil {
		return nil // broken already reaped it
	}
	_ = s.stdin.Close()
	if err := s.cmd.Wait(); err != nil {
		return &gitError{cmd: "cat-file", err: err, stderr: trimStderr(s.stderr.String())}
	}
	return nil
}

// parseRawCommit reads a commit object as `git show -s
// --format=%an%x00%aI%x00%B` would describe it; ok is false for an object
// in a legacy encoding, which git show converts to UTF-8.
func parseRawCommit(raw []byte) (c Commit, ok bool) {
	headers, message, _ := bytes.Cut(raw, []byte("\n\n"))
	for line := range strings.Lines(string(headers)) {
		key, value, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		switch key {
		case "encoding":
			if !strings.EqualFold(value, "utf-8") && !strings.EqualFold(value, "utf8") {
				return Commit{}, false
			}
		case "author":
			c.Author, c.Time = parseIdent(value)
		}
	}
	c.Message = cutMessage(strings.TrimSpace(string(message)))
	return c, true
}

// parseIdent reads "Name <email> <unix seconds> <+hhmm>".
func parseIdent(v string) (string, time.Time) {
	name, rest, _ := strings.Cut(v, "<")
	_, when, _ := strings.Cut(rest, ">")
	fields := strings.Fields(when)
	if len(fields) != 2 || len(fields[1]) != 5 {
		return strings.TrimSpace(name), time.Time{}
	}
	secs, err1 := strconv.ParseInt(fields[0], 10, 64)
	hh, err2 := strconv.Atoi(fields[1][1:3])
	mm, err3 := strconv.Atoi(fields[1][3:5])
	if err1 != nil || err2 != nil || err3 != nil || (fields[1][0] != '+' && fields[1][0] != '-') {
		return strings.TrimSpace(name), time.Time{}
	}
	offset := hh*3600 + mm*60
	if fields[1][0] == '-' {
		offset = -offset
	}
	return strings.TrimSpace(name), time.Unix(secs, 0).In(time.FixedZone("", offset))
}
