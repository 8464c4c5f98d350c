package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/cliout"
)

func (a *app) secretCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secret",
		Short: "Set, list and delete a pipeline's secrets",
		Long: `A job receives the secrets its screwdriver.yaml lists under secrets: as
environment variables, masked (***) in its logs. Values are encrypted at rest by
the API and never pass through Temporal: the executor fetches them when it
claims the build. Pull-request builds get only secrets set with --allow-in-pr.
Setting, listing and deleting need the manage-secrets privilege; executors'
tokens need read-secrets (and each executor presents the credential of the
build attempt it claimed); controllers' tokens need read-scm-tokens to read a
pipeline's own SCM token for its commit statuses.`,
	}
	cmd.AddCommand(a.secretSetCmd(), a.secretListCmd(), a.secretDeleteCmd())
	return cmd
}

func (a *app) secretSetCmd() *cobra.Command {
	var file string
	var allowInPR, allowInForkPR bool
	cmd := &cobra.Command{
		Use:   "set PIPELINE NAME [--file F] [--allow-in-pr] [--allow-in-fork-pr]",
		Short: "Set a secret (the value from standard input, or --file)",
		Example: `  printf %s "$NPM_TOKEN" | sluice secret set myapp NPM_TOKEN
  sluice secret set myapp DEPLOY_KEY --file ~/.ssh/deploy_key`,
		Args: args("PIPELINE", "NAME"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := api.CheckSecretName(argv[1]); err != nil {
				return usageError(err)
			}
			var value []byte
			var err error
			if file != "" {
				value, err = os.ReadFile(file) //nolint:gosec // the user names the file
				if err != nil {
					return usageError(fmt.Errorf("--file: %w", err))
				}
			} else {
				value, err = io.ReadAll(io.LimitReader(a.stdin, 1<<20))
				if err != nil {
					return fmt.Errorf("read the value from standard input: %w", err)
				}
				// A value typed or echoed ends with one newline that is not part of it.
				value = bytes.TrimSuffix(bytes.TrimSuffix(value, []byte("\n")), []byte("\r"))
			}
			if len(value) == 0 {
				return usageError(errors.New("empty value: pipe it on standard input or use --file"))
			}
			s, err := a.client().SetSecret(cmd.Context(), argv[0], argv[1], api.SetSecretRequest{Value: string(value), AllowInPR: allowInPR, AllowInForkPR: allowInForkPR})
			if err != nil {
				return err
			}
			return a.done(s, "set secret %s of %s", s.Name, s.Pipeline)
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "read the value from this file (whole, newlines kept)")
	cmd.Flags().BoolVar(&allowInPR, "allow-in-pr", false, "give the secret to pull-request builds from branches of the same repository too (Screwdriver's allowInPR)")
	cmd.Flags().BoolVar(&allowInForkPR, "allow-in-fork-pr", false, "give the secret to pull requests from forks too: their code is anyone's, so only for values harmless to leak (implies --allow-in-pr)")
	return cmd
}

func (a *app) secretListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list PIPELINE",
		Short:   "List a pipeline's secrets (names only, never values)",
		Example: "  sluice secret list myapp",
		Args:    args("PIPELINE"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ss, err := a.client().ListSecrets(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			if ss == nil {
				ss = []api.Secret{}
			}
			return a.print(ss, func(w io.Writer) error {
				if len(ss) == 0 {
					_, err := fmt.Fprintf(w, "pipeline %s has no secrets\n", argv[0])
					return err
				}
				now := time.Now()
				t := cliout.NewTable(w, "NAME", "ALLOW IN PR", "ALLOW IN FORK PR", "UPDATED", "BY")
				for _, s := range ss {
					t.Row(s.Name, yesNo(s.AllowInPR), yesNo(s.AllowInForkPR), cliout.Ago(s.UpdatedAt, now), cliout.Or(s.UpdatedBy, cliout.Dash))
				}
				return t.Flush()
			})
		},
	}
}

func (a *app) secretDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "delete PIPELINE NAME",
		Short:   "Delete a secret",
		Example: "  sluice secret delete myapp NPM_TOKEN",
		Args:    args("PIPELINE", "NAME"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := a.client().DeleteSecret(cmd.Context(), argv[0], argv[1]); err != nil {
				return err
			}
			return a.done(map[string]string{"pipeline": argv[0], "deleted": argv[1]}, "deleted secret %s of %s", argv[1], argv[0])
		},
	}
}
