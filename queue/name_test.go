package queue_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/queue"
)

func TestValidateName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		input   string
		wantErr string // exact message; empty means valid
	}{
		{name: "simple", input: "gpu"},
		{name: "default", input: queue.DefaultQueueName},
		{name: "every allowed kind", input: "Build_Pool-2.linux x86"},
		{name: "single spaces", input: "gpu pool a"},
		{name: "one character", input: "a"},
		{name: "digits only", input: "42"},
		{name: "dots and dashes at the ends", input: ".-_"},
		{name: "exactly the limit", input: strings.Repeat("a", queue.MaxNameLength)},
		{name: "empty", input: "", wantErr: `queue name "": must not be empty`},
		{name: "only a space", input: " ", wantErr: `queue name " ": starts with a space`},
		{name: "leading space", input: " gpu", wantErr: `queue name " gpu": starts with a space`},
		{name: "trailing space", input: "gpu ", wantErr: `queue name "gpu ": ends with a space`},
		{name: "double space", input: "gpu  pool", wantErr: `queue name "gpu  pool": contains two spaces in a row`},
		{
			name: "too long", input: strings.Repeat("a", queue.MaxNameLength+1),
			wantErr: `queue name "` + strings.Repeat("a", 65) + `": is 65 characters long, the limit is 64`,
		},
		{
			name: "slash", input: "gpu/a",
			wantErr: `queue name "gpu/a": character '/' at position 4 is not allowed (use letters, digits, single spaces, '_', '-' and '.')`,
		},
		{
			name: "tab", input: "gpu\tpool",
			wantErr: `queue name "gpu\tpool": character '\t' at position 4 is not allowed (use letters, digits, single spaces, '_', '-' and '.')`,
		},
		{
			name: "non-ASCII letter", input: "zürich",
			wantErr: `queue name "zürich": character 'ü' at position 2 is not allowed (use letters, digits, single spaces, '_', '-' and '.')`,
		},
		{
			name: "star is reserved for members", input: "*",
			wantErr: `queue name "*": character '*' at position 1 is not allowed (use letters, digits, single spaces, '_', '-' and '.')`,
		},
		{name: "invalid UTF-8", input: "gpu\xff", wantErr: `queue name "gpu\xff": is not valid UTF-8`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := queue.ValidateName(tt.input)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, queue.ErrInvalidName)
			require.EqualError(t, err, tt.wantErr)
		})
	}
}
