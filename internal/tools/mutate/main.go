// Command mutate is sluice's mutation test (make mutate): it breaks one
// documented behaviour at a time (mutants.txt), runs the unit tests of the
// package it broke, and prints which breaks the tests caught and the
// score. It works on a copy of the working tree, so the checkout is never
// touched. It is slow (one test run per mutant) and kept out of CI.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// mutant is one deliberate break.
type mutant struct {
	ID, What, File, From, To string
	Pkgs                     []string
	line                     int // where it starts in the list
}

// outcome is what the tests made of a mutant.
type outcome struct {
	m      mutant
	result string // KILLED, SURVIVED, NO-COMPILE
	by     string // the first failing test
	took   time.Duration
}

func main() {
	list := flag.String("mutants", "internal/tools/mutate/mutants.txt", "the list of mutants")
	only := flag.String("only", "", "run only the mutants whose id matches this regular expression")
	timeout := flag.Duration("timeout", 10*time.Minute, "time limit of one mutant's test run")
	flag.Parse()
	if err := run(*list, *only, *timeout, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
}

func run(listPath, only string, timeout time.Duration, out io.Writer) error {
	f, err := os.Open(listPath)
	if err != nil {
		return fmt.Errorf("open the mutant list: %w", err)
	}
	mutants, err := parse(f, listPath)
	_ = f.Close()
	if err != nil {
		return err
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			return fmt.Errorf("-only: %w", err)
		}
		var kept []mutant
		for _, m := range mutants {
			if re.MatchString(m.ID) {
				kept = append(kept, m)
			}
		}
		mutants = kept
	}
	if len(mutants) == 0 {
		return errors.New("no mutant to run")
	}
	// Every mutant must apply before any test runs: a stale list is an
	// error, not a silently lower score.
	if err := applies(mutants, listPath, "."); err != nil {
		return err
	}
	work, err := copyTree()
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	_, _ = fmt.Fprintf(out, "mutate: %d mutants, working copy %s\n", len(mutants), work)

	var results []outcome
	for _, m := range mutants {
		o, err := try(work, m, timeout)
		if err != nil {
			return err
		}
		results = append(results, o)
		_, _ = fmt.Fprintf(out, "%-6s %-10s %6.1fs  %s%s\n", m.ID, o.result, o.took.Seconds(), m.What, by(o))
	}
	return report(out, results)
}

func by(o outcome) string {
	if o.by == "" {
		return ""
	}
	return " (" + o.by + ")"
}

// applies checks that each mutant's text occurs exactly once in its file
// under root.
func applies(mutants []mutant, listPath, root string) error {
	for _, m := range mutants {
		data, err := os.ReadFile(filepath.Join(root, m.File))
		if err != nil {
			return fmt.Errorf("%s:%d [%s]: %w", listPath, m.line, m.ID, err)
		}
		if n := bytes.Count(data, []byte(m.From)); n != 1 {
			return fmt.Errorf("%s:%d [%s]: %q occurs %d times in %s, want exactly once: update the list", listPath, m.line, m.ID, m.From, n, m.File)
		}
	}
	return nil
}

// checkList parses the list at path and checks it applies under root.
func checkList(path, root string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open the mutant list: %w", err)
	}
	defer func() { _ = f.Close() }()
	mutants, err := parse(f, path)
	if err != nil {
		return err
	}
	return applies(mutants, path, root)
}

// report prints the score: killed over killed + survived (a mutant that
// does not compile counts for neither, and is listed).
func report(out io.Writer, results []outcome) error {
	var killed, survived, broken []string
	for _, o := range results {
		switch o.result {
		case "KILLED":
			killed = append(killed, o.m.ID)
		case "SURVIVED":
			survived = append(survived, o.m.ID)
		default:
			broken = append(broken, o.m.ID)
		}
	}
	n := len(killed) + len(survived)
	_, _ = fmt.Fprintf(out, "\nscore: %d of %d mutants killed (%.0f%%)\n", len(killed), n, 100*float64(len(killed))/float64(max(n, 1)))
	if len(survived) > 0 {
		_, _ = fmt.Fprintf(out, "survived: %s\n", strings.Join(survived, " "))
	}
	if len(broken) > 0 {
		return fmt.Errorf("mutants that do not compile (fix the list): %s", strings.Join(broken, " "))
	}
	return nil
}

// try applies m in the working copy, runs its packages' tests and puts the
// file back.
func try(work string, m mutant, timeout time.Duration) (outcome, error) {
	path := filepath.Join(work, m.File)
	orig, err := os.ReadFile(path)
	if err != nil {
		return outcome{}, fmt.Errorf("[%s]: %w", m.ID, err)
	}
	mutated := bytes.Replace(orig, []byte(m.From), []byte(m.To), 1)
	if err := os.WriteFile(path, mutated, 0o644); err != nil { //nolint:gosec // a file of the working copy, named by our own list
		return outcome{}, fmt.Errorf("[%s]: %w", m.ID, err)
	}
	defer os.WriteFile(path, orig, 0o644) //nolint:errcheck // best effort; the copy is removed at the end

	pkgs := m.Pkgs
	if len(pkgs) == 0 {
		pkgs = []string{"./" + filepath.Dir(m.File) + "/"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", append([]string{"test", "-count=1", "-failfast"}, pkgs...)...)
	cmd.Dir = work
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	o := outcome{m: m, took: time.Since(start)}
	text := buf.String()
	switch {
	case err == nil:
		o.result = "SURVIVED"
	case strings.Contains(text, "[build failed]") || strings.Contains(text, "[setup failed]"):
		o.result = "NO-COMPILE"
		o.by = firstLine(text)
	default:
		o.result = "KILLED"
		if ctx.Err() != nil {
			o.by = "timed out after " + timeout.String()
		} else if mm := reFail.FindStringSubmatch(text); mm != nil {
			o.by = mm[1]
		}
	}
	return o, nil
}

var reFail = regexp.MustCompile(`--- FAIL: (\S+)`)

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return ""
}

// copyTree copies the working tree's files (tracked and untracked, not
// ignored) to a temporary directory.
func copyTree() (string, error) {
	ls, err := exec.CommandContext(context.Background(), "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return "", fmt.Errorf("git ls-files (run make mutate from the checkout): %w", err)
	}
	work, err := os.MkdirTemp("", "sluice-mutate-")
	if err != nil {
		return "", fmt.Errorf("working copy: %w", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(ls), "\x00"), "\x00") {
		data, err := os.ReadFile(name)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			return work, fmt.Errorf("copy %s: %w", name, err)
		}
		info, err := os.Stat(name)
		if err != nil {
			return work, fmt.Errorf("copy %s: %w", name, err)
		}
		dst := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return work, fmt.Errorf("copy %s: %w", name, err)
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil { //nolint:gosec // a tracked file of this checkout
			return work, fmt.Errorf("copy %s: %w", name, err)
		}
	}
	return work, nil
}

// parse reads the mutant list (see mutants.txt for the format).
func parse(r io.Reader, name string) ([]mutant, error) {
	var out []mutant
	var cur *mutant
	flush := func() error {
		if cur == nil {
			return nil
		}
		if cur.File == "" || cur.From == "" {
			return fmt.Errorf("%s:%d [%s]: needs file and from", name, cur.line, cur.ID)
		}
		out = append(out, *cur)
		cur = nil
		return nil
	}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			if err := flush(); err != nil {
				return nil, err
			}
			id, what, ok := strings.Cut(strings.TrimPrefix(line, "["), "]")
			if !ok || id == "" {
				return nil, fmt.Errorf("%s:%d: want [id] description", name, n)
			}
			cur = &mutant{ID: id, What: strings.TrimSpace(what), line: n}
		default:
			if cur == nil {
				return nil, fmt.Errorf("%s:%d: %q before the first [id]", name, n, line)
			}
			key, val, ok := strings.Cut(line, "=")
			if !ok {
				return nil, fmt.Errorf("%s:%d: want key = value", name, n)
			}
			key, val = strings.TrimSpace(key), strings.TrimSpace(val)
			switch key {
			case "file":
				cur.File = val
			case "from":
				cur.From = val
			case "to":
				cur.To = val
			case "pkgs":
				cur.Pkgs = strings.Fields(val)
			default:
				return nil, fmt.Errorf("%s:%d: unknown key %q (file, from, to, pkgs)", name, n, key)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}
