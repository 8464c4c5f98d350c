package queue_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/queue"
)

func TestQueueValidate(t *testing.T) {
	t.Parallel()
	executors := queue.Rule{RunOn: queue.RunOnExecutors, MaxParallel: 4}
	controller := queue.Rule{RunOn: queue.RunOnController, MaxParallel: 1, MinGap: 5 * time.Second}
	tests := []struct {
		name         string
		queue        queue.Queue
		wantErr      string
		wantProblems int
		wantIs       []error
	}{
		{name: "valid", queue: queue.Queue{Name: "gpu", Rules: []queue.Rule{executors, controller}, UseRoles: []string{"ml"}}},
		{name: "default queue", queue: queue.DefaultQueue()},
		{
			name:         "no rules",
			queue:        queue.Queue{Name: "gpu"},
			wantErr:      `queue "gpu": needs at least one rule`,
			wantProblems: 1,
			wantIs:       []error{queue.ErrInvalidQueue, queue.ErrInvalidRule},
		},
		{
			name:         "bad name",
			queue:        queue.Queue{Name: "gpu  pool", Rules: []queue.Rule{executors}},
			wantErr:      `queue "gpu  pool": queue name "gpu  pool": contains two spaces in a row`,
			wantProblems: 1,
			wantIs:       []error{queue.ErrInvalidQueue, queue.ErrInvalidName},
		},
		{
			name:         "second rule invalid",
			queue:        queue.Queue{Name: "gpu", Rules: []queue.Rule{executors, {RunOn: queue.RunOnController}}},
			wantErr:      `queue "gpu": rule 2: max-parallel must be ≥ 1 (got 0)`,
			wantProblems: 1,
			wantIs:       []error{queue.ErrInvalidQueue, queue.ErrInvalidRule},
		},
		{
			name: "every problem at once",
			queue: queue.Queue{
				Name:     " gpu",
				Rules:    []queue.Rule{{RunOn: "master", MaxParallel: 0}, executors, {RunOn: queue.RunOnAny, MaxParallel: 1, MinGap: -time.Second}},
				UseRoles: []string{"ml", "", "ml"},
			},
			wantErr: `queue " gpu": 6 problems: ` +
				`queue name " gpu": starts with a space; ` +
				`rule 1: run-on="master" must be one of controller, executors, any; ` +
				`rule 1: max-parallel must be ≥ 1 (got 0); ` +
				`rule 3: min-gap must not be negative (got -1s); ` +
				`use role 2 is empty; ` +
				`use role "ml" is listed twice`,
			wantProblems: 6,
			wantIs:       []error{queue.ErrInvalidQueue, queue.ErrInvalidName, queue.ErrInvalidRule},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.queue.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.wantErr)
			for _, target := range tt.wantIs {
				require.ErrorIs(t, err, target)
			}
			var verr *queue.ValidationError
			require.ErrorAs(t, err, &verr)
			require.Equal(t, tt.queue.Name, verr.Queue)
			require.Len(t, verr.Problems, tt.wantProblems)
		})
	}
}

func TestValidationErrorIsNotForbidden(t *testing.T) {
	t.Parallel()
	err := queue.Queue{Name: "gpu"}.Validate()
	require.Error(t, err)
	require.NotErrorIs(t, err, queue.ErrForbidden)
	require.NotErrorIs(t, err, queue.ErrInvalidName)
}

func TestDefaultQueue(t *testing.T) {
	t.Parallel()
	q := queue.DefaultQueue()
	require.Equal(t, queue.DefaultQueueName, q.Name)
	require.NotEmpty(t, q.Description)
	require.Empty(t, q.UseRoles, "every authenticated user may use the default queue")
	require.Equal(t, []queue.Rule{
		{RunOn: queue.RunOnExecutors, MaxParallel: 2},
		{RunOn: queue.RunOnController, MaxParallel: 1},
	}, q.Rules)

	// Each call returns a fresh value: changing one copy leaves the next alone.
	q.Rules[0].MaxParallel = 99
	require.Equal(t, 2, queue.DefaultQueue().Rules[0].MaxParallel)
}

func TestQueueJSON(t *testing.T) {
	t.Parallel()
	q := queue.Queue{
		Name: "gpu", Description: "GPU builds",
		Rules:    []queue.Rule{{RunOn: queue.RunOnExecutors, MaxParallel: 4, Labels: map[string]string{"pool": "gpu"}}},
		UseRoles: []string{"ml"},
	}
	data, err := json.Marshal(q)
	require.NoError(t, err)
	require.JSONEq(t, `{
		"name": "gpu", "description": "GPU builds",
		"rules": [{"run_on": "executors", "max_parallel": 4, "min_gap": 0, "labels": {"pool": "gpu"}}],
		"use_roles": ["ml"]
	}`, string(data))
	var back queue.Queue
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, q, back)
}

func TestQueueMaxWaitValidation(t *testing.T) {
	t.Parallel()
	base := queue.Queue{Name: "q", Rules: []queue.Rule{{RunOn: queue.RunOnExecutors, MaxParallel: 1}}}
	for _, tc := range []struct {
		maxWait time.Duration
		want    string
	}{
		{0, ""},
		{time.Second, ""},
		{queue.MaxWaitLimit, ""},
		{-time.Minute, "max-wait must not be negative (got -1m0s)"},
		{time.Millisecond, "max-wait must be at least 1s, or 0 for no limit (got 1ms)"},
		{queue.MaxWaitLimit + time.Hour, "max-wait must be at most 720h0m0s (got 721h0m0s)"},
	} {
		q := base
		q.MaxWait = tc.maxWait
		err := q.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("max-wait %s: %v", tc.maxWait, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, queue.ErrInvalidQueue) {
			t.Errorf("max-wait %s: got %v, want %q", tc.maxWait, err, tc.want)
		}
	}
}
