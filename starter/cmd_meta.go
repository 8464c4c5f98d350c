package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/buildmeta"
	"github.com/sluice-ci/sluice/internal/flock"
)

// metaCmd is Screwdriver's `meta` inside a build: the executor puts this
// binary on the steps' PATH as `meta` (and `sluice`), and points
// SD_META_PATH at the build's metadata file.
func (a *app) metaCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "meta",
		Short: "Read and write the running build's metadata (Screwdriver's meta)",
		Long: `meta reads and writes the metadata of the build it runs in: a JSON object in
the file $SD_META_PATH, which the build starts with (its event's metadata, then
its upstream builds') and which sluice keeps when the build ends, failed builds
included; the builds it triggers start with it. Inside a build the command is
also on the PATH as plain "meta".

Keys are dotted names (deploy.version sets "version" inside the object
"deploy"). meta get prints a string as it is, anything else as JSON, and null
for a key that is not set.`,
	}
	cmd.AddCommand(a.metaGetCmd(), a.metaSetCmd())
	return cmd
}

// metaPath is the build's metadata file.
func (a *app) metaPath() (string, error) {
	p := a.getenv("SD_META_PATH")
	if p == "" {
		return "", errors.New("meta: SD_META_PATH is not set: meta reads and writes the metadata of a running build, inside its steps")
	}
	return p, nil
}

func (a *app) metaGetCmd() *cobra.Command {
	var asJSON bool
	var external string
	cmd := &cobra.Command{
		Use:   "get KEY",
		Short: "Print a metadata value (null when it is not set)",
		Example: `  meta get version
  meta get deploy --json
  meta get version --external sd@other-pipeline:publish`,
		Args: args("KEY"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			var doc buildmeta.Doc
			if external != "" {
				pipeline, job, ok := strings.Cut(strings.TrimPrefix(external, "sd@"), ":")
				if !strings.HasPrefix(external, "sd@") || !ok || pipeline == "" || job == "" {
					return usageError(fmt.Errorf("--external %q: want sd@PIPELINE:JOB", external))
				}
				m, err := a.buildClient().JobMeta(cmd.Context(), pipeline, job)
				switch {
				case api.IsNotFound(err):
					doc = buildmeta.Doc{} // no successful build yet: every key is null
				case err != nil:
					return err
				default:
					if doc, err = buildmeta.Parse(m.Meta); err != nil {
						return err
					}
				}
			} else {
				path, err := a.metaPath()
				if err != nil {
					return err
				}
				if doc, err = buildmeta.ReadFile(path); err != nil {
					return err
				}
			}
			v, ok, err := buildmeta.Get(doc, argv[0])
			if err != nil {
				return usageError(err)
			}
			out, err := buildmeta.Format(v, ok, asJSON)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.stdout, out)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the value as JSON (a string quoted)")
	cmd.Flags().StringVar(&external, "external", "", "read the last successful build of another job instead: sd@PIPELINE:JOB")
	return cmd
}

func (a *app) metaSetCmd() *cobra.Command {
	var jsonValue bool
	cmd := &cobra.Command{
		Use:   "set KEY VALUE",
		Short: "Set a metadata value (a string, or JSON with --json-value)",
		Example: `  meta set version 1.2.3
  meta set deploy.targets '["eu","us"]' --json-value`,
		Args: args("KEY", "VALUE"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			path, err := a.metaPath()
			if err != nil {
				return err
			}
			v, err := buildmeta.ParseValue(argv[1], jsonValue)
			if err != nil {
				return usageError(err)
			}
			// Steps running meta set at once lose nothing.
			held, err := flock.Lock(cmd.Context(), filepath.Join(filepath.Dir(path), ".meta.lock"))
			if err != nil {
				return fmt.Errorf("meta: %w", err)
			}
			defer func() { _ = held.Unlock() }()
			doc, err := buildmeta.ReadFile(path)
			if err != nil {
				return err
			}
			if err := buildmeta.Set(doc, argv[0], v); err != nil {
				return usageError(err)
			}
			return buildmeta.WriteFile(path, doc)
		},
	}
	cmd.Flags().BoolVar(&jsonValue, "json-value", false, "parse VALUE as JSON (an object, a list, a number, true/false)")
	return cmd
}

// buildClient is the API client of a command inside a build: it acts for
// the build with its attempt's credential (SD_BUILD_ID,
// SD_BUILD_CREDENTIAL, SD_API_URL); outside a build it is the usual
// client (SLUICE_API_URL, SLUICE_TOKEN).
func (a *app) buildClient() *api.Client {
	cred := a.getenv("SD_BUILD_CREDENTIAL")
	if cred == "" {
		return a.client()
	}
	url := a.getenv("SD_API_URL")
	if url == "" {
		url = a.getenv("SLUICE_API_URL")
	}
	c := api.NewClient(url)
	c.Build, c.BuildCredential = a.getenv("SD_BUILD_ID"), cred
	return c
}
