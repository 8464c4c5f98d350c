package activities

import (
	"bytes"
	"encoding/base64"
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

// A multi-line secret printed line by line, and a secret piped through
// base64, are masked too (review finding 13); short lines are not, so a
// key's "-----" framing does not mask ordinary output.
func TestMaskSecretsLinesAndBase64(t *testing.T) {
	t.Parallel()
	key := "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\r\nAQEFAASCBKcwggSjAgEAAoIB\n-----END KEY-----\n"
	sink := &bufSink{bufs: map[string]*closingBuffer{}}
	masked := maskSecrets(sink, map[string]string{"KEY": key, "TOKEN": "s3cret-token"})
	w, err := masked.Open("leak")
	require.NoError(t, err)
	out := "line: MIIEvQIBADANBgkqhkiG9w0B\n" +
		"b64: " + base64.StdEncoding.EncodeToString([]byte("s3cret-token")) + "\n" +
		"raw: " + base64.RawURLEncoding.EncodeToString([]byte(key)) + "\n" +
		"ok: ----- done\n"
	_, err = w.Write([]byte(out))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.Equal(t, "line: ***\nb64: ***\nraw: ***\nok: ----- done\n", sink.bufs["leak"].String())
}
