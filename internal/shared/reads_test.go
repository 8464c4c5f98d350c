package shared_test

import (
	"context"
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
