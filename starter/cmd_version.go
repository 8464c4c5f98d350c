package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// commit is the VCS commit, set by `make build` (-ldflags -X main.commit=…)
// when the build has no VCS stamp (GOFLAGS=-buildvcs=false).
var commit string

// versionInfo is what `sluice version` prints.
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
	Temporal  string `json:"temporal_server,omitempty"`
	SDK       string `json:"temporal_sdk,omitempty"`
}

// buildVersion reads the module version, the commit and the Temporal
// module versions from the binary's build info.
func buildVersion() versionInfo {
	v := versionInfo{Version: "(devel)", Commit: commit, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	for _, d := range bi.Deps {
		switch d.Path {
		case "go.temporal.io/server":
			v.Temporal = d.Version
		case "go.temporal.io/sdk":
			v.SDK = d.Version
		}
	}
	return v
}

func (v versionInfo) String() string {
	s := "sluice " + v.Version
	if v.Commit != "" {
		c := v.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += " (" + c
		if v.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return fmt.Sprintf("%s %s; Temporal server %s, SDK %s", s, v.GoVersion, v.Temporal, v.SDK)
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print sluice's version, commit and the Temporal versions it embeds",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := buildVersion()
			return a.print(v, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, v.String())
				return err
			})
		},
	}
}
