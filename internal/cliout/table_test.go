package cliout

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rows [][]string
		want string
	}{
		{
			name: "header only",
			want: "NAME  STATUS\n",
		},
		{
			name: "aligned without trailing spaces",
			rows: [][]string{{"a", "SUCCESS"}, {"longer-name", "FAILURE"}},
			want: "NAME         STATUS\n" +
				"a            SUCCESS\n" +
				"longer-name  FAILURE\n",
		},
		{
			name: "cells folded to one line",
			rows: [][]string{{"x\ty", "a\nb"}},
			want: "NAME  STATUS\n" +
				"x y   a b\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			tb := NewTable(&b, "NAME", "STATUS")
			for _, r := range tt.rows {
				tb.Row(r...)
			}
			require.NoError(t, tb.Flush())
			require.Equal(t, tt.want, b.String())
			require.Equal(t, len(tt.rows), tb.Rows())
		})
	}
}

func TestFields(t *testing.T) {
	t.Parallel()
	var f Fields
	f.Add("id", "app/3")
	f.Add("empty", "")
	f.Add("reason", "two\nlines")
	var b strings.Builder
	require.NoError(t, f.Write(&b))
	require.Equal(t, "id:     app/3\nreason: two lines\n", b.String())
}
