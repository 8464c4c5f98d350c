// Package runner runs the steps of one build as real processes on a Linux or
// other Unix host. It knows nothing of Temporal, HTTP or the pipeline format:
// the caller (an executor activity) checks out the workspace, builds the
// environment, and hands Run a Spec.
//
// # Processes: one shell per build
//
// All steps of a build run in one shell session, as in Screwdriver's
// launcher: one long-lived `sh` in Spec.Dir with exactly Spec.Env (a nil Env
// means an empty environment, never the executor's own, so no executor
// secret leaks into a build) reads a driver script from a pipe. Each step's
// command is written to a file and sourced (`. step.sh`) by that shell, so
// `export FOO=bar`, `cd sub`, shell variables, functions and `set -e` of one
// step are seen by the next. The shell leads its own process group, so a
// signal sent to the group reaches every descendant that did not deliberately
// leave it (setsid, setpgid).
//
// Per step, the driver redirects the sourced command's standard output and
// standard error to a FIFO of its own (copied to the step's log) and its
// standard input from /dev/null (a step never reads the driver script), then
// writes the step's exit status to a status descriptor the steps do not
// inherit, and saves `export -p` and `pwd`. So every step keeps its own exit
// code, its own log stream and its own StepStarted/StepEnded events.
//
// A step that ends the shell (`exit 3`, a command failing under `set -e`, a
// syntax error, a signal) fails with the shell's exit code. A later step
// (teardown) then gets a fresh shell that starts in the working directory
// and sources the exported variables the last completed step left; shell
// variables, functions and options of the dead shell are lost, and a
// variable that was unset is back with its Spec.Env value.
//
// Background processes a step leaves behind (`./server &`) keep running for
// the later steps, as they would in Screwdriver or GitHub Actions, so a test
// step can talk to a service started by an earlier step and a teardown step
// can stop it. When Run returns every process group it created has been
// terminated: SIGTERM to each group, SIGKILL after Spec.KillGrace to whatever
// is left. The log of a step is closed once the step's exit code is known and
// its FIFO has been drained; output written by its background processes more
// than one second (outputDrain) after that is discarded, so a background
// process holding its output open never hangs Run.
//
// # Containers
//
// With Spec.Container set, the sessions are `<runtime> exec -i <container>
// sh` in a container the caller started (StartContainer) with Spec.Dir and
// Spec.ControlDir mounted; Spec.Env is passed with -e, and the step scripts,
// output FIFOs, status FIFO and saved state live in the mounted control
// directory. Killing a session there means `kill -1` inside the container
// (every process but its init); the caller removes the container after Run
// (RemoveContainer), and an executor that starts again removes the
// containers labelled as its own (RemoveLabelled). ChooseRuntime picks host,
// docker or podman.
//
// # Nothing outlives the attempt
//
// On the host each session's shell gets SIGKILL if the executor dies
// (parent-death signal), but what its steps started does not. So
// Spec.OnProcessGroup reports every process group as it is created; the
// executor records it (AppendGroupRecord), and its reaper (StartReaper,
// RunReaper) kills whatever those groups still hold as soon as the
// executor is gone; an executor that starts again does the same for its
// earlier lives' records (KillRecordedGroups).
//
// # Order, failure and teardown
//
// Steps run one at a time. Steps named "teardown-*" run after all the other
// steps, in their relative order (the pipeline package puts them last anyway).
// The first non-teardown step that exits non-zero makes the build fail; the
// remaining non-teardown steps are reported Skipped. Teardown steps always
// run: after success, failure, timeout and cancellation.
//
// The exit code of a step killed by a signal is 128+signal, as shells report
// it (143 for SIGTERM, 137 for SIGKILL). A step that cannot start at all (its
// log cannot be opened, sh cannot be started) has ExitCode -1, an Err, and
// fails the build.
//
// # Timeout, cancellation and the teardown budget
//
// Spec.Timeout bounds the non-teardown steps. When it expires, or when ctx is
// cancelled, the session's process group (the shell, the running step and
// whatever earlier steps left running) gets SIGTERM and, after
// Spec.KillGrace, SIGKILL; the build ends StatusTimeout or StatusAborted, and
// teardown steps run in a fresh shell as above.
//
// Teardown steps are not counted against Spec.Timeout (a build that timed out
// has no time left, yet its teardown must run). Instead the teardown phase as
// a whole has its own budget, starting when the first teardown step starts:
//
//   - Spec.TeardownTimeout (default 5 minutes) normally;
//   - Spec.AbortTeardownTimeout (default 30 seconds) once ctx is cancelled,
//     whether the cancellation came before or during the teardown phase.
//
// When the budget runs out the running teardown step is killed like any other
// and the remaining teardown steps are skipped. So Run returns at the latest
// after Timeout + TeardownTimeout + a few KillGrace periods; callers sizing an
// activity's start-to-close timeout should allow for that. A teardown step
// that fails or runs out of budget turns a successful build into a failure or
// a timeout; it never hides an earlier failure, timeout or abort.
package runner
