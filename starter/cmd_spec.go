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

// specProblem is one problem of a spec file in `-o json` output.
type specProblem struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Job     string `json:"job,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	// Severity is "error" (the file is invalid) or "warning".
	Severity string `json:"severity"`
}

// specProblems lists the problems of a spec error, one per problem of a
// validation error, else one for the error itself.
func specProblems(file string, err error) []specProblem {
	var verr *pipeline.ValidationError
	if errors.As(err, &verr) {
		out := make([]specProblem, 0, len(verr.Problems))
		for _, p := range verr.Problems {
			out = append(out, specProblem{File: file, Line: p.Line, Column: p.Column, Job: p.Job, Field: p.Field, Message: p.Message, Severity: "error"})
		}
		return out
	}
	return []specProblem{{File: file, Message: err.Error(), Severity: "error"}}
}

// pipelineValidateCmd returns "sluice pipeline validate FILE...": it parses each file
// and prints "FILE: ok" plus "FILE: warning: ..." lines on stdout, or
// "FILE:LINE:COLUMN: error: ..." lines (every problem) on stderr; with -o json
// it prints a JSON array of every problem and warning of every file on stdout
// (empty when all are valid and clean). It fails when any file is invalid.
func (a *app) pipelineValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Validate pipeline specs (screwdriver.yaml)",
		Args:  cobra.MinimumNArgs(1),
		// An invalid spec is not a usage mistake: print its problems, not the usage.
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			invalid := 0
			if a.output == "json" {
				results := []specProblem{}
				for _, file := range args {
					spec, err := parseSpecFile(file)
					if err != nil {
						invalid++
						results = append(results, specProblems(file, err)...)
						continue
					}
					for _, w := range spec.Warnings {
						results = append(results, specProblem{File: file, Field: w.Field, Message: w.Message, Severity: "warning"})
					}
				}
				if err := a.print(results, nil); err != nil {
					return err
				}
				if invalid > 0 {
					return fmt.Errorf("%w: %d of %d files", errInvalidSpecFiles, invalid, len(args))
				}
				return nil
			}
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

// pipelineGraphCmd returns "sluice pipeline graph [--format json|dot|mermaid] FILE":
// it prints the workflow graph of a valid spec, or its problems on stderr
// (with -o json, a JSON array of them on stdout) and fails. -o json alone
// means --format json.
func (a *app) pipelineGraphCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "graph [--format json|dot|mermaid] FILE",
		Short: "Print a pipeline spec's workflow graph",
		Args:  cobra.ExactArgs(1),
		// An invalid spec is not a usage mistake: print its problems, not the usage.
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.output == "json" && !cmd.Flags().Changed("format") {
				format = string(pipeline.FormatJSON)
			}
			if !slices.Contains(pipeline.Formats, pipeline.Format(format)) {
				return usageError(fmt.Errorf("graph: %w %q (want json, dot or mermaid)", pipeline.ErrUnknownFormat, format))
			}
			spec, err := parseSpecFile(args[0])
			if err != nil {
				if a.output == "json" {
					if perr := a.print(specProblems(args[0], err), nil); perr != nil {
						return perr
					}
				} else {
					printSpecError(cmd.ErrOrStderr(), args[0], err)
				}
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

// printSpecError prints every problem of a spec error, one
// "FILE:LINE:COLUMN: error: ..." line each (as compilers do, so editors jump
// to it), on stderr: the command fails anyway, so a failed write is not
// reported.
func printSpecError(w io.Writer, file string, err error) {
	for _, p := range specProblems(file, err) {
		at := file
		if p.Line > 0 {
			at = fmt.Sprintf("%s:%d:%d", file, p.Line, p.Column)
		}
		_, _ = fmt.Fprintf(w, "%s: error: %s\n", at, p.Message)
	}
}
