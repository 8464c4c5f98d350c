package shared_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/internal/shared"
)

// TestReadsShareByKey: a caller joins the read of its own key under way,
// not another key's, and says it joined; no answer outlives its read.
func TestReadsShareByKey(t *testing.T) {
	var s shared.Reads[string, int]
	release := make(chan struct{})
	reads := make(chan string, 4)
	read := func(key string, v int) func(context.Context) (int, error) {
		return func(context.Context) (int, error) {
			reads <- key
			<-release
			return v, nil
		}
	}
	type answer struct {
		v      int
		joined bool
		err    error
	}
	ask := func(key string, v int) chan answer {
		ch := make(chan answer, 1)
		go func() {
			got, joined, err := s.Do(t.Context(), key, read(key, v))
			ch <- answer{got, joined, err}
		}()
		return ch
	}
	a1 := ask("a", 1)
	require.Equal(t, "a", <-reads)
	a2 := ask("a", 2)
	b := ask("b", 3)
	require.Equal(t, "b", <-reads, "another key reads on its own")
	require.Eventually(t, func() bool { return s.Waiting("a") == 2 }, 10*time.Second, time.Millisecond)
	close(release)
	require.Equal(t, answer{1, false, nil}, <-a1)
	require.Equal(t, answer{1, true, nil}, <-a2, "the second caller got the read under way's answer")
	require.Equal(t, answer{3, false, nil}, <-b)
	require.Zero(t, s.Waiting("a"))
	require.Equal(t, answer{4, false, nil}, <-ask("a", 4), "an ended read's answer is not kept")
	require.Equal(t, "a", <-reads)
}

// TestStandingAnswers: an answer DoKept read without error stands for the
// key while its read began less than the given time ago; Do keeps none,
// and an error replaces nothing.
func TestStandingAnswers(t *testing.T) {
	var s shared.Reads[string, int]
	clock := time.Unix(1_000_000, 0)
	s.Now = func() time.Time { return clock }
	read := func(v int, err error) func(context.Context) (int, error) {
		return func(context.Context) (int, error) { return v, err }
	}
	_, ok := s.Standing("a", time.Second)
	require.False(t, ok, "nothing read yet")

	_, _, err := s.Do(t.Context(), "a", read(1, nil))
	require.NoError(t, err)
	_, ok = s.Standing("a", time.Second)
	require.False(t, ok, "Do keeps no answer")

	_, _, err = s.DoKept(t.Context(), "a", read(2, nil))
	require.NoError(t, err)
	clock = clock.Add(time.Second - time.Millisecond)
	v, ok := s.Standing("a", time.Second)
	require.True(t, ok)
	require.Equal(t, 2, v)
	_, ok = s.Standing("b", time.Second)
	require.False(t, ok, "another key's answer does not stand for it")

	_, _, err = s.DoKept(t.Context(), "a", read(3, errors.New("unreachable")))
	require.Error(t, err)
	v, ok = s.Standing("a", 2*time.Second)
	require.True(t, ok, "a failed read replaces nothing")
	require.Equal(t, 2, v)
	clock = clock.Add(time.Millisecond)
	_, ok = s.Standing("a", time.Second)
	require.False(t, ok, "the answer's time is up")
}
