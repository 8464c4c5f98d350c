package scm

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkCheckout compares a build's checkout from a warm mirror with the
// four git processes it took before (rev-parse, clone, remote set-url,
// checkout) and with git clone and checkout (before assemble): go test
// -run '^$' -bench Checkout ./scm/
func BenchmarkCheckout(b *testing.B) {
	h := newHistory(b)
	r, err := Open(context.Background(), "file://"+h.dir, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	g := r.(*gitRepo)
	ctx := context.Background()
	base := b.TempDir()
	n := 0
	dir := func() string {
		n++
		return filepath.Join(base, strconv.Itoa(n))
	}
	b.Run("four-processes", func(b *testing.B) {
		for b.Loop() {
			d := dir()
			if _, err := runGit(ctx, g.mirror, nil, "rev-parse", "--verify", "--quiet", h.c4+"^{commit}"); err != nil {
				b.Fatal(err)
			}
			if _, err := runGit(ctx, "", nil, "clone", "--quiet", "--no-checkout", g.mirror, d); err != nil {
				b.Fatal(err)
			}
			if _, err := runGit(ctx, d, nil, "remote", "set-url", "origin", "file://"+h.dir); err != nil {
				b.Fatal(err)
			}
			if _, err := runGit(ctx, d, nil, "checkout", "--quiet", "--detach", h.c4); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("git-clone", func(b *testing.B) { // the checkout before assemble
		for b.Loop() {
			d := dir()
			if err := g.gitClone(ctx, d, false); err != nil {
				b.Fatal(err)
			}
			if err := g.setOrigin(ctx, d); err != nil {
				b.Fatal(err)
			}
			if _, err := runGit(ctx, d, nil, "checkout", "--quiet", "--detach", h.c4); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("checkout", func(b *testing.B) {
		for b.Loop() {
			if err := r.Checkout(ctx, h.c4, dir()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("checkout-copy", func(b *testing.B) {
		for b.Loop() {
			if err := g.CheckoutCopy(ctx, h.c4, dir()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
