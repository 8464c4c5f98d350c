package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// statusErr is an API answer with an HTTP status.
type statusErr int

func (s statusErr) Error() string   { return "status" }
func (s statusErr) StatusCode() int { return int(s) }

// TestRetryAPI: a controller or API that is down for a while (no answer,
// or 5xx) delays the call; an answer retrying cannot change ends it at once.
func TestRetryAPI(t *testing.T) {
	t.Parallel()
	calls := 0
	err := retryAPI(t.Context(), func(context.Context) error {
		calls++
		switch calls {
		case 1:
			return errors.New("dial tcp: connection refused")
		case 2:
			return statusErr(500)
		case 3:
			return statusErr(429)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 4, calls)

	calls = 0
	err = retryAPI(t.Context(), func(context.Context) error {
		calls++
		return statusErr(403)
	})
	require.Equal(t, statusErr(403), err)
	require.Equal(t, 1, calls, "a refusal is not retried")

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err = retryAPI(ctx, func(context.Context) error { return statusErr(503) })
	require.Equal(t, statusErr(503), err, "the last error once ctx ends")
}
