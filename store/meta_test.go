package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/store"
)

func TestBuildMeta(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		d := b.open(t)
		_, ok, err := d.GetBuildMeta(ctx, "app/build/1")
		require.NoError(t, err)
		require.False(t, ok, "nothing saved yet")
		_, ok, err = d.LastSuccessfulMeta(ctx, "app", "build")
		require.NoError(t, err)
		require.False(t, ok)

		put := func(build, job string, pr, event, attempt int, status, meta string) {
			t.Helper()
			require.NoError(t, d.PutBuildMeta(ctx, store.BuildMeta{
				Build: build, Pipeline: "app", Job: job, PR: pr, Event: event, Attempt: attempt, Status: status, Meta: []byte(meta),
			}))
		}
		put("app/build/1", "build", 0, 1, 1, "FAILURE", `{"v":"1a"}`)
		put("app/build/1", "build", 0, 1, 2, "SUCCESS", `{"v":"1"}`)    // a later attempt replaces it
		put("app/build/1", "build", 0, 1, 1, "FAILURE", `{"v":"late"}`) // an earlier one's, late, does not
		put("app/build/2", "build", 0, 2, 1, "SUCCESS", `{"v":"2"}`)
		put("app/build/3", "build", 0, 3, 1, "FAILURE", `{"v":"3"}`)
		put("app/PR-7:build/4", "build", 7, 4, 1, "SUCCESS", `{"v":"pr"}`)
		put("app/test/2", "test", 0, 2, 1, "SUCCESS", `{"t":true}`)

		m, ok, err := d.GetBuildMeta(ctx, "app/build/1")
		require.NoError(t, err)
		require.True(t, ok)
		require.JSONEq(t, `{"v":"1"}`, string(m.Meta))
		require.Equal(t, 2, m.Attempt)
		require.Equal(t, "SUCCESS", m.Status)
		require.False(t, m.UpdatedAt.IsZero())

		last, ok, err := d.LastSuccessfulMeta(ctx, "app", "build")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "app/build/2", last.Build, "the newest successful build outside pull requests")
		require.JSONEq(t, `{"v":"2"}`, string(last.Meta))

		_, ok, err = d.GetEventMeta(ctx, "ref-1")
		require.NoError(t, err)
		require.False(t, ok)
		require.NoError(t, d.PutEventMeta(ctx, "ref-1", "app", []byte(`{"release":"yes"}`)))
		em, ok, err := d.GetEventMeta(ctx, "ref-1")
		require.NoError(t, err)
		require.True(t, ok)
		require.JSONEq(t, `{"release":"yes"}`, string(em))
	})
}
