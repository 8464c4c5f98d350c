package activities

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

type bufSink struct{ bufs map[string]*closingBuffer }

type closingBuffer struct {
	bytes.Buffer
	closed bool
}

func (b *closingBuffer) Close() error { b.closed = true; return nil }

func (s *bufSink) Open(step string) (io.WriteCloser, error) {
	b := &closingBuffer{}
	s.bufs[step] = b
	return b, nil
}

// TestMaskSecrets: values are masked whole, also when a write splits them,
// a value containing another is masked as one, and the rest passes intact.
func TestMaskSecrets(t *testing.T) {
	t.Parallel()
	sink := &bufSink{bufs: map[string]*closingBuffer{}}
	masked := maskSecrets(sink, map[string]string{"A": "hunter2", "B": "hunter2-long", "EMPTY": ""})
	w, err := masked.Open("show")
	require.NoError(t, err)
	for _, chunk := range []string{"token=hun", "ter2 and ", "hunter2-lo", "ng; h", "unter", "2\nbye hunt"} {
		n, err := w.Write([]byte(chunk))
		require.NoError(t, err)
		require.Equal(t, len(chunk), n)
	}
	require.NoError(t, w.Close())
	require.True(t, sink.bufs["show"].closed)
	require.Equal(t, "token=*** and ***; ***\nbye hunt", sink.bufs["show"].String())

	plain := &bufSink{bufs: map[string]*closingBuffer{}}
	require.Same(t, plain, maskSecrets(plain, map[string]string{"EMPTY": ""}), "nothing to mask: the sink itself")
}
