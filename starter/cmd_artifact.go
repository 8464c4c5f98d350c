package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/sluice-ci/sluice/internal/cliout"
)

func (a *app) buildArtifactsCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "artifacts BUILD [PATH]",
		Short: "List a build's artifacts, or download one",
		Long: `Without PATH, list the files BUILD uploaded from $SD_ARTIFACTS_DIR, with their
sizes. With PATH, download that file to stdout, or to --out FILE.`,
		Example: `  sluice build artifacts myapp/build/12
  sluice build artifacts myapp/build/12 dist/app --out app`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, argv []string) error {
			c := a.client()
			if len(argv) == 1 {
				list, err := c.ListArtifacts(cmd.Context(), argv[0])
				if err != nil {
					return err
				}
				return a.print(list, func(w io.Writer) error {
					if len(list.Artifacts) == 0 {
						_, err := fmt.Fprintf(w, "build %s has no artifacts\n", list.Build)
						return err
					}
					t := cliout.NewTable(w, "PATH", "SIZE")
					for _, af := range list.Artifacts {
						t.Row(af.Path, strconv.FormatInt(af.Size, 10))
					}
					return t.Flush()
				})
			}
			return a.download(cmd.Context(), out, func(ctx context.Context, w io.Writer) error {
				_, err := c.DownloadArtifact(ctx, argv[0], argv[1], w)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the file here instead of stdout")
	return cmd
}

func (a *app) artifactCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "artifact",
		Short: "Read the artifacts of the running event's builds (inside a build)",
	}
	var job, out string
	get := &cobra.Command{
		Use:   "get --job JOB PATH",
		Short: "Download an artifact of this event's build of JOB",
		Long: `Inside a build, download the file PATH that this event's build of JOB uploaded
from its $SD_ARTIFACTS_DIR (for a restart, the build of JOB it inherited), to
--out FILE, or by default to PATH under the working directory. The command
acts for the running build (SD_BUILD_ID, SD_EVENT_ID, SD_BUILD_CREDENTIAL,
SD_API_URL), which may read only its own event's artifacts.`,
		Example: `  sluice artifact get --job build dist/app
  sluice artifact get --job build dist/app --out /tmp/app`,
		Args: args("PATH"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if job == "" {
				return usageError(errors.New("--job: name the job whose build uploaded the artifact"))
			}
			event := a.getenv("SD_EVENT_ID")
			if event == "" {
				return errors.New("artifact get: SD_EVENT_ID is not set: the command reads the artifacts of the running build's event, inside its steps")
			}
			dest := out
			if dest == "" {
				dest = filepath.FromSlash(argv[0])
			}
			c := a.buildClient()
			return a.download(cmd.Context(), dest, func(ctx context.Context, w io.Writer) error {
				_, err := c.EventArtifact(ctx, event, job, argv[0], w)
				return err
			})
		},
	}
	get.Flags().StringVar(&job, "job", "", "the job whose build in this event uploaded the file")
	get.Flags().StringVar(&out, "out", "", "write the file here (default: PATH under the working directory)")
	cmd.AddCommand(get)
	return cmd
}

// download writes what fetch gives to the file dest (created with its
// directories, removed again when the download fails), or stdout for "".
func (a *app) download(ctx context.Context, dest string, fetch func(ctx context.Context, w io.Writer) error) error {
	if dest == "" || dest == "-" {
		return fetch(ctx, a.stdout)
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(dest), err)
	}
	f, err := os.Create(dest) //nolint:gosec // the user's own output file
	if err != nil {
		return fmt.Errorf("create %s: %w", dest, err)
	}
	err = fetch(ctx, f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("write %s: %w", dest, cerr)
	}
	if err != nil {
		_ = os.Remove(dest)
		return err
	}
	return nil
}
