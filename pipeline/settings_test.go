package pipeline

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// jobWithAnnotations builds a one-job spec whose job carries the given annotation lines.
func jobWithAnnotations(lines ...string) string {
	var sb strings.Builder
	sb.WriteString(sharedHeaderSpaces + "jobs:\n    main:\n        requires: [~commit]\n")
	if len(lines) > 0 {
		sb.WriteString("        annotations:\n")
		for _, l := range lines {
			fmt.Fprintf(&sb, "            %s\n", l)
		}
	}
	return sb.String()
}

func TestSettings(t *testing.T) {
	t.Parallel()
	def := DefaultSettings()
	with := func(f func(*Settings)) Settings {
		s := def
		f(&s)
		return s
	}
	tests := []struct {
		name    string
		lines   []string
		want    Settings
		wantErr string
	}{
		{name: "defaults", want: Settings{CollapseBuilds: true, Timeout: 90 * time.Minute, BlockedBySameJob: true, ManualStartEnabled: true, Priority: 3, RetryOnLoss: true}},
		{name: "no retry on loss", lines: []string{"sluice.dev/retryOnLoss: false"}, want: with(func(s *Settings) { s.RetryOnLoss = false })},
		{
			name: "bools as bools", lines: []string{"screwdriver.cd/collapseBuilds: false", "screwdriver.cd/blockedBySameJob: false", "screwdriver.cd/manualStartEnabled: false", "screwdriver.cd/virtualJob: true"},
			want: with(func(s *Settings) {
				s.CollapseBuilds, s.BlockedBySameJob, s.ManualStartEnabled, s.VirtualJob = false, false, false, true
			}),
		},
		{
			name: "bools as strings", lines: []string{`screwdriver.cd/collapseBuilds: "false"`, `screwdriver.cd/virtualJob: "TRUE"`},
			want: with(func(s *Settings) { s.CollapseBuilds, s.VirtualJob = false, true }),
		},
		{name: "timeout number", lines: []string{"screwdriver.cd/timeout: 30"}, want: with(func(s *Settings) { s.Timeout = 30 * time.Minute })},
		{name: "timeout string", lines: []string{`screwdriver.cd/timeout: "120"`}, want: with(func(s *Settings) { s.Timeout = 2 * time.Hour })},
		{name: "wait time", lines: []string{"screwdriver.cd/blockedBySameJobWaitTime: 5"}, want: with(func(s *Settings) { s.BlockedBySameJobWaitTime = 5 * time.Minute })},
		{name: "executor", lines: []string{"screwdriver.cd/executor: gpu large.v2"}, want: with(func(s *Settings) { s.Executor = "gpu large.v2" })},
		{name: "delay", lines: []string{"sluice.dev/delay: 5m"}, want: with(func(s *Settings) { s.Delay = 5 * time.Minute })},
		{name: "priority", lines: []string{"sluice.dev/priority: 1"}, want: with(func(s *Settings) { s.Priority = 1 })},
		{name: "priority string", lines: []string{`sluice.dev/priority: "5"`}, want: with(func(s *Settings) { s.Priority = 5 })},
		{
			name: "periodic", lines: []string{"screwdriver.cd/buildPeriodically: H 4 * * *"},
			want: with(func(s *Settings) { s.BuildPeriodically, s.PeriodicCron = "H 4 * * *", mustExpand("H 4 * * *", "main") }),
		},
		{name: "bad bool", lines: []string{"screwdriver.cd/collapseBuilds: maybe"}, wantErr: `Job "main": annotation "screwdriver.cd/collapseBuilds" must be a boolean (true or false), got "maybe"`},
		{name: "bad retryOnLoss", lines: []string{"sluice.dev/retryOnLoss: sometimes"}, wantErr: `Job "main": annotation "sluice.dev/retryOnLoss" must be a boolean (true or false), got "sometimes"`},
		{name: "non-numeric timeout", lines: []string{"screwdriver.cd/timeout: soon"}, wantErr: `annotation "screwdriver.cd/timeout" must be a whole number of minutes between 1 and 1000000, got "soon"`},
		{name: "zero timeout", lines: []string{"screwdriver.cd/timeout: 0"}, wantErr: `"screwdriver.cd/timeout" must be a whole number`},
		{name: "fractional timeout", lines: []string{"screwdriver.cd/timeout: 1.5"}, wantErr: `got 1.5`},
		{name: "bad executor", lines: []string{`screwdriver.cd/executor: " gpu"`}, wantErr: `"screwdriver.cd/executor" must be a queue name`},
		{name: "executor not a string", lines: []string{`screwdriver.cd/executor: [a]`}, wantErr: `got an array`},
		{name: "bad delay", lines: []string{"sluice.dev/delay: 30"}, wantErr: `"sluice.dev/delay" must be a non-negative Go duration`},
		{name: "negative delay", lines: []string{"sluice.dev/delay: -1s"}, wantErr: `"sluice.dev/delay" must be a non-negative Go duration`},
		{name: "priority too high", lines: []string{"sluice.dev/priority: 6"}, wantErr: `"sluice.dev/priority" must be a whole number from 1 to 5, got 6`},
		{name: "priority too low", lines: []string{"sluice.dev/priority: 0"}, wantErr: `got 0`},
		{name: "bad cron", lines: []string{"screwdriver.cd/buildPeriodically: H 25 * * *"}, wantErr: `"screwdriver.cd/buildPeriodically" is not a valid cron expression`},
		{name: "cron not a string", lines: []string{"screwdriver.cd/buildPeriodically: 5"}, wantErr: `must be a cron expression (a string), got 5`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec, err := Parse([]byte(jobWithAnnotations(tt.lines...)))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				var verr *ValidationError
				require.ErrorAs(t, err, &verr)
				require.Equal(t, "main", verr.Problems[0].Job)
				require.True(t, strings.HasPrefix(verr.Problems[0].Field, "annotations."))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, spec.Jobs["main"].Settings)
		})
	}
}

func mustExpand(expr, seed string) string {
	s, err := ExpandCron(expr, seed)
	if err != nil {
		panic(err)
	}
	return s
}

func TestSettingsFromSharedAnnotations(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, `
shared:
	image: node:20
	steps: [{run: make}]
	annotations:
		screwdriver.cd/timeout: 10
		sluice.dev/priority: 2
jobs:
	a: {requires: [~commit]}
	b:
		requires: [~commit]
		annotations: {sluice.dev/priority: 4}
`)
	require.Equal(t, 10*time.Minute, spec.Jobs["a"].Settings.Timeout)
	require.Equal(t, 2, spec.Jobs["a"].Settings.Priority)
	require.Equal(t, 10*time.Minute, spec.Jobs["b"].Settings.Timeout)
	require.Equal(t, 4, spec.Jobs["b"].Settings.Priority)
}

func TestUnknownSluiceAnnotationWarns(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, jobWithAnnotations("sluice.dev/priorty: 2"))
	require.Contains(t, spec.Warnings, Warning{Field: "jobs.main.annotations.sluice.dev/priorty", Message: "is not a known sluice.dev annotation; it is ignored"})
}

func TestChainPR(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want bool
	}{
		{name: "unset", yaml: "", want: false},
		{name: "true", yaml: "annotations:\n  screwdriver.cd/chainPR: true\n", want: true},
		{name: "string true", yaml: "annotations:\n  screwdriver.cd/chainPR: \"true\"\n", want: true},
		{name: "false", yaml: "annotations:\n  screwdriver.cd/chainPR: false\n", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec, err := Parse([]byte(tc.yaml + "jobs:\n  main:\n    image: alpine\n    requires: [~pr]\n    steps: [echo]\n"))
			require.NoError(t, err)
			require.Equal(t, tc.want, spec.ChainPR())
		})
	}
}
