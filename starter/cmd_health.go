package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-ci/sluice/api"
)

// healthCmd is for container health checks: images without curl or wget
// can still probe the API or a worker's metrics endpoint.
func (a *app) healthCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "health [URL]",
		Short: "Probe an HTTP endpoint (default: the API's /readyz); exit 0 when it answers 2xx",
		Long: `health GETs URL (default SLUICE_API_URL/readyz) with a 5 s timeout and exits 0
when it answers 2xx, 1 on any other answer and 3 when nothing answers. It is
meant for container health checks (docker-compose.yml uses it).`,
		Example: "  sluice health\n  sluice health http://localhost:9464/metrics",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, argv []string) error {
			url := a.client().BaseURL + "/readyz"
			if len(argv) == 1 {
				url = argv[0]
			}
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodGet, url, nil)
			if err != nil {
				return usageError(fmt.Errorf("URL %q: %w", url, err))
			}
			resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
			if err != nil {
				return &api.UnreachableError{URL: url, Err: err}
			}
			_ = resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				return fmt.Errorf("%s answered %s", url, resp.Status)
			}
			return a.done(map[string]any{"url": url, "status": resp.StatusCode}, "%s: %s", url, resp.Status)
		},
	}
}
