package pipeline

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzParse checks that Parse never panics, and that whatever it accepts can be
// rendered, serialised and queried without panicking either.
func FuzzParse(f *testing.F) {
	for _, sub := range []string{"valid", "invalid"} {
		files, _ := filepath.Glob(filepath.Join(conformanceDir, sub, "*.yaml"))
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
	for _, seed := range []string{
		specOrAnd, specStages, specTriggers, specRemote, specDetached,
		jobWithAnnotations("screwdriver.cd/buildPeriodically: H H(0-5) * * H/2", "sluice.dev/delay: 5m", "sluice.dev/priority: 2"),
		"jobs: {a: {image: a, steps: [x], freezeWindows: ['* * ? * MON-FRI', '*/5 0-6 1,15 * ?']}}",
		"jobs: {a: &a {image: a, steps: [x]}, b: {<<: *a, requires: [a, ~sd@p:j, stage@s]}}\nstages: {s: {jobs: [b]}}",
		"a: &a [x]\nb: &b [*a, *a]\njobs: {m: {image: a, steps: *b}}",
		"jobs: {m: {image: 'node:{{V}}', steps: [x], matrix: {V: [1, 2.5, true, {a: b}]}}}",
		"---\nversion: 4\njobs: {m: {image: a, steps: [x]}}\n---\njobs: {}",
		"",
		"~",
		"[",
	} {
		f.Add([]byte(seed))
	}
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := Parse(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		var buf bytes.Buffer
		for _, format := range Formats {
			if err := Render(&buf, spec, format); err != nil {
				t.Fatalf("render %s: %v", format, err)
			}
		}
		if _, err := json.Marshal(spec); err != nil {
			t.Fatalf("marshal: %v", err)
		}
		for _, name := range spec.JobOrder {
			spec.NextJobs(name)
			spec.JoinParents(name)
			ws, err := ParseFreezeWindows(spec.Jobs[name].FreezeWindows)
			if err != nil {
				t.Fatalf("accepted freeze windows do not parse: %v", err)
			}
			_, _ = ws.NextOpen(at)
		}
		for _, kind := range []EventKind{EventCommit, EventPR, EventPRClosed, EventTag, EventRelease, EventSubscribe} {
			spec.StartJobs(kind, "main", "main")
		}
		for _, r := range spec.RemoteTriggers() {
			spec.SubscribedJobs(r)
		}
		for _, s := range spec.StageOrder {
			spec.StageJobs(s)
		}
	})
}
