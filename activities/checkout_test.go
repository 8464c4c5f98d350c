package activities

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/runner"
	"github.com/sluice-ci/sluice/scm"
)

// checkoutRepo records which checkout RunBuild asked for.
type checkoutRepo struct {
	scm.Repo
	plain, copied int
}

func (r *checkoutRepo) Checkout(context.Context, string, string) error {
	r.plain++
	return nil
}

func (r *checkoutRepo) CheckoutCopy(context.Context, string, string) error {
	r.copied++
	return nil
}

// A build whose steps run in a container gets a checkout sharing no file
// with the executor's mirror; host builds get the hard-linked one.
func TestCheckoutCopiesForContainers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, runtime, image string
		copied               bool
	}{
		{name: "host runtime", runtime: runner.RuntimeHost, image: "alpine"},
		{name: "container runtime, job without image", runtime: "podman"},
		{name: "container", runtime: "podman", image: "alpine", copied: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := &Activities{Runtime: tc.runtime}
			r := &checkoutRepo{}
			require.NoError(t, a.checkout(context.Background(), r, RunBuildInput{SHA: "abc", Image: tc.image}, t.TempDir()))
			if tc.copied {
				require.Equal(t, 1, r.copied)
				require.Zero(t, r.plain)
			} else {
				require.Equal(t, 1, r.plain)
				require.Zero(t, r.copied)
			}
		})
	}
}
