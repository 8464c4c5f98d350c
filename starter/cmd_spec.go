package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/sluice-ci/sluice/pipeline"
)

// errInvalidSpecFiles is returned by "pipeline validate" when any file is invalid.
var errInvalidSpecFiles = errors.New("invalid pipeline spec")

// newPipelineValidateCmd returns "sluice pipeline validate FILE...": it parses each file
// and prints "FILE: ok" plus "FILE: warning: ..." lines on stdout, or "FILE: error: ..."
// lines (every problem) on stderr; it fails when any file is invalid.
func newPipelineValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Validate pipeline specs (screwdriver.yaml)",
		Args:  cobra.MinimumNArgs(1),
		// An invalid spec is not a usage mistake: print its problems, not the usage.
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			invalid := 0
			for _, file := range args {
				spec, err := parseSpecFile(file)
				if err != nil {
					invalid++
					printSpecError(errOut, file, err)
					continue
				}
				if _, err := fmt.Fprintf(out, "%s: ok\n", file); err != nil {
					return err
				}
				for _, w := range spec.Warnings {
					if _, err := fmt.Fprintf(out, "%s: warning: %s\n", file, w); err != nil {
						return err
					}
				}
			}
			if invalid > 0 {
				return fmt.Errorf("%w: %d of %d files", errInvalidSpecFiles, invalid, len(args))
			}
			return nil
		},
	}
}

// newPipelineGraphCmd returns "sluice pipeline graph [--format json|dot|mermaid] FILE":
// it prints the workflow graph of a valid spec, or its problems on stderr and fails.
func newPipelineGraphCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "graph [--format json|dot|mermaid] FILE",
		Short: "Print a pipeline spec's workflow graph",
		Args:  cobra.ExactArgs(1),
		// An invalid spec is not a usage mistake: print its problems, not the usage.
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(pipeline.Formats, pipeline.Format(format)) {
				return fmt.Errorf("graph: %w %q (want json, dot or mermaid)", pipeline.ErrUnknownFormat, format)
			}
			spec, err := parseSpecFile(args[0])
			if err != nil {
				printSpecError(cmd.ErrOrStderr(), args[0], err)
				return fmt.Errorf("%w: %s", errInvalidSpecFiles, args[0])
			}
			if err := pipeline.Render(cmd.OutOrStdout(), spec, pipeline.Format(format)); err != nil {
				return fmt.Errorf("graph %s: %w", args[0], err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", string(pipeline.FormatJSON), "output format: json, dot or mermaid")
	return cmd
}

// parseSpecFile reads and parses one pipeline spec file.
func parseSpecFile(file string) (*pipeline.Spec, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	spec, err := pipeline.ParseWithOptions(data, pipeline.Options{})
	if err != nil {
		return nil, fmt.Errorf("parse spec %s: %w", file, err)
	}
	return spec, nil
}

// printSpecError prints every problem of a spec error, one "FILE: error: ..."
// line each, on stderr: the command fails anyway, so a failed write is not
// reported.
func printSpecError(w io.Writer, file string, err error) {
	var verr *pipeline.ValidationError
	if errors.As(err, &verr) {
		for _, p := range verr.Problems {
			_, _ = fmt.Fprintf(w, "%s: error: %s\n", file, p.Message)
		}
		return
	}
	_, _ = fmt.Fprintf(w, "%s: error: %v\n", file, err)
}
