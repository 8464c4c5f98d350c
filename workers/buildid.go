package workers

import (
	"runtime/debug"

	"go.temporal.io/sdk/worker"
)

// NameBinary tells the Temporal SDK what to call this binary in the
// workflow tasks it completes (their build ID and the workflows' auto-reset
// points). Left to itself the SDK hashes the whole executable the first
// time a worker starts: sluice's is ~230 MB, a third of a second or more of
// CPU at every executor, controller and server start. A clean build's
// commit names the binary just as well; a build from a modified tree, or
// one without a commit stamp (a test binary), keeps the SDK's hash, so
// two different builds never share a name.
func NameBinary() {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	if name := binaryName(bi.Settings); name != "" {
		worker.SetBinaryChecksum(name)
	}
}

// binaryName is NameBinary's name for a build with these settings, or ""
// when the SDK's hash must name it.
func binaryName(settings []debug.BuildSetting) string {
	rev, clean := "", false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			clean = s.Value == "false"
		}
	}
	if rev == "" || !clean {
		return ""
	}
	return "sluice@" + rev
}
