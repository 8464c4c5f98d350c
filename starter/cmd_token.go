package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/cliout"
)

func (a *app) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "List and revoke your personal tokens",
		Long: `Personal tokens are minted on the pages (/ui/tokens) by a person signed in with
the identity provider (SLUICE_OIDC_ISSUER), shown once, and act as that person.
These commands list and revoke the tokens of the user SLUICE_TOKEN signs in as.`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:     "list",
		Short:   "List your personal tokens (never their values)",
		Example: "  sluice token list\n  sluice token list -o json",
		Args:    args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ts, err := a.client().ListPersonalTokens(cmd.Context())
			if err != nil {
				return err
			}
			if ts == nil {
				ts = []api.PersonalToken{}
			}
			return a.print(ts, func(w io.Writer) error {
				if len(ts) == 0 {
					_, err := fmt.Fprintln(w, "no personal tokens")
					return err
				}
				t := cliout.NewTable(w, "ID", "NAME", "CREATED", "EXPIRES", "STATE")
				for _, p := range ts {
					state := "active"
					switch {
					case !p.RevokedAt.IsZero():
						state = "revoked"
					case !p.Active:
						state = "expired"
					}
					t.Row(p.ID, cliout.Or(p.Name, cliout.Dash), p.CreatedAt.UTC().Format(time.RFC3339), p.ExpiresAt.UTC().Format(time.RFC3339), state)
				}
				return t.Flush()
			})
		},
	}, &cobra.Command{
		Use:     "revoke ID",
		Short:   "Revoke one of your personal tokens",
		Example: "  sluice token revoke 3f9c2a1b7d6e5f40",
		Args:    args("ID"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := a.client().RevokePersonalToken(cmd.Context(), argv[0]); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "personal token %s revoked\n", argv[0])
			return err
		},
	})
	return cmd
}
