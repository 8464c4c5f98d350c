package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	t.Parallel()
	got, err := parse(strings.NewReader(`# comment
[M1] first break
file = a/b.go
from = if x == 1 {
to   = if x != 1 {

[M2] second
file = c.go
from = a = b
to =
pkgs = ./c/ ./d/
`), "list")
	require.NoError(t, err)
	require.Equal(t, []mutant{
		{ID: "M1", What: "first break", File: "a/b.go", From: "if x == 1 {", To: "if x != 1 {", line: 2},
		{ID: "M2", What: "second", File: "c.go", From: "a = b", To: "", Pkgs: []string{"./c/", "./d/"}, line: 7},
	}, got)

	for _, bad := range []struct{ text, want string }{
		{"file = x\n", `list:1: "file = x" before the first [id]`},
		{"[M1] x\nfile = a\n", "list:1 [M1]: needs file and from"},
		{"[M1] x\nfile a\n", "list:2: want key = value"},
		{"[M1] x\nfrm = a\n", `list:2: unknown key "frm" (file, from, to, pkgs)`},
		{"[] x\n", "list:1: want [id] description"},
	} {
		_, err := parse(strings.NewReader(bad.text), "list")
		require.EqualError(t, err, bad.want)
	}
}

// The shipped list parses and every mutant still applies to the code.
func TestShippedListApplies(t *testing.T) {
	t.Parallel()
	require.NoError(t, checkList("mutants.txt", "../../.."))
}
