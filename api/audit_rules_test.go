package api

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAuditDetailsHideCredentials: a repository URL's credentials never
// reach a record, whether the pipeline is created with it or repointed to
// it; and every audited route is a route.
func TestAuditDetailsHideCredentials(t *testing.T) {
	t.Parallel()
	const url = "https://ci-bot:tok3n-never-recorded@github.com/acme/app.git"
	r := httptest.NewRequest("PATCH", "/api/v1/pipelines/app", nil)
	r.SetPathValue("name", "app")
	e := auditRules["PATCH /api/v1/pipelines/{name}"].describe(r, []byte(`{"repo":"`+url+`","branch":"main"}`), nil)
	require.Equal(t, AuditPipelineRepo, e.action)
	require.NotContains(t, e.detail, "tok3n")
	require.Contains(t, e.detail, "github.com/acme/app.git")
	require.Contains(t, e.detail, "branch=main")
	e = auditRules["POST /api/v1/pipelines"].describe(r, nil, []byte(`{"name":"app","repo":"`+url+`","branch":"main"}`))
	require.Equal(t, AuditPipelineCreate, e.action)
	require.NotContains(t, e.detail, "tok3n")

	h := &handler{d: Deps{Secrets: &SecretStore{}}}
	patterns := map[string]bool{}
	for _, rt := range h.routes() {
		patterns[rt.Pattern] = true
	}
	for p := range auditRules {
		require.True(t, patterns[p], "audited %s is a route", p)
		require.False(t, strings.HasPrefix(p, "GET "), "%s changes nothing", p)
	}
}
