// Command testreport reads `go test -json` on stdin, prints results like
// `go test` does (the output of failing tests in full), and ends with the
// slowest packages and tests, and every skipped test with its reason (a
// test skips when a tool it needs is missing: the report says so rather
// than passing quietly). It exits non-zero when anything failed.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type result struct {
	name    string
	elapsed float64
}

func main() {
	label := flag.String("label", "tests", "name of this run in the summary")
	top := flag.Int("top", 10, "how many slow tests to list")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *label, *top); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
}

// printer writes the report as it goes and keeps the first write error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *printer) print(s string) {
	if p.err == nil {
		_, p.err = io.WriteString(p.w, s)
	}
}

func run(in io.Reader, w io.Writer, label string, top int) error {
	out := &printer{w: w}
	output := map[string][]string{} // package/test -> output lines
	var tests, pkgs []result
	var skipped []string
	failed := 0
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil || ev.Action == "" {
			out.print(string(line) + "\n") // build errors and other plain text
			continue
		}
		key := ev.Package + " " + ev.Test
		switch ev.Action {
		case "output":
			output[key] = append(output[key], ev.Output)
		case "build-output":
			out.print(ev.Output)
		case "build-fail":
			failed++
		case "pass", "fail", "skip":
			if ev.Test == "" {
				pkgs = append(pkgs, result{ev.Package, ev.Elapsed})
				status := map[string]string{"pass": "ok  ", "fail": "FAIL", "skip": "?   "}[ev.Action]
				out.printf("%s\t%s\t%.1fs\n", status, ev.Package, ev.Elapsed)
				if ev.Action == "fail" {
					failed++
					for _, l := range output[key] {
						out.print(l)
					}
				}
				continue
			}
			if !strings.Contains(ev.Test, "/") {
				tests = append(tests, result{ev.Package + "." + ev.Test, ev.Elapsed})
			}
			if ev.Action == "skip" {
				skipped = append(skipped, fmt.Sprintf("%s.%s: %s", ev.Package, ev.Test, skipReason(output[key])))
			}
			if ev.Action == "fail" {
				failed++
				out.printf("--- FAIL: %s (%s)\n", ev.Test, ev.Package)
				for _, l := range output[key] {
					out.print("    " + l)
				}
			}
			delete(output, key)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	byTime := func(rs []result) {
		sort.Slice(rs, func(i, j int) bool { return rs[i].elapsed > rs[j].elapsed })
	}
	byTime(pkgs)
	byTime(tests)
	out.printf("\n-- %s: slowest packages\n", label)
	for i, r := range pkgs {
		if i == top {
			break
		}
		out.printf("  %7.1fs  %s\n", r.elapsed, r.name)
	}
	out.printf("-- %s: slowest tests\n", label)
	for i, r := range tests {
		if i == top {
			break
		}
		out.printf("  %7.1fs  %s\n", r.elapsed, r.name)
	}
	out.printf("-- %s: %d skipped tests\n", label, len(skipped))
	for _, s := range skipped {
		out.printf("    %s\n", s)
	}
	if out.err != nil {
		return fmt.Errorf("write the report: %w", out.err)
	}
	if failed > 0 {
		return fmt.Errorf("%s: %d failures", label, failed)
	}
	return nil
}

// skipReason is what a skipped test printed, without go test's own lines.
func skipReason(lines []string) string {
	var parts []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		parts = append(parts, l)
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " ")
}
