package workers

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/workflows"
)

// The claim update carries every part of the executor's claim, the build it
// names included (a build workflow refuses a claim for another build).
func TestClaimRequestCarriesTheClaim(t *testing.T) {
	t.Parallel()
	got := claimRequest(activities.Claim{
		WorkflowID: "build/app/main/7", Build: "app/main/7", Attempt: 2, Dispatch: 3, Executor: "exec-a",
		CredentialHash: "aa", StepHash: "bb",
	})
	require.Equal(t, workflows.ClaimRequest{
		Build: "app/main/7", Attempt: 2, Dispatch: 3, Executor: "exec-a", CredentialHash: "aa", StepCredentialHash: "bb",
	}, got)
}
