// Package runner runs the steps of one build as real processes on a Linux or
// other Unix host. It knows nothing of Temporal, HTTP or the pipeline format:
// the caller (an executor activity) checks out the workspace, builds the
// environment, and hands Run a Spec.
//
// # Processes
//
// Every step runs as `sh -c <command>` in Spec.Dir with exactly Spec.Env (a nil
// Env means an empty environment, never the executor's own, so no executor
// secret leaks into a build). Each step is the leader of its own process
// group, so a signal sent to the group reaches every descendant that did not
// deliberately leave it (setsid, setpgid). Standard input is /dev/null;
// standard output and standard error are one pipe copied to the step's log.
//
// Background processes a step leaves behind (`./server &`) keep running for
// the later steps, as they would in Screwdriver or GitHub Actions, so a test
// step can talk to a service started by an earlier step and a teardown step
// can stop it. When Run returns every process group it created has been
// terminated: SIGTERM to each group, SIGKILL after Spec.KillGrace to whatever
// is left. The log of a step is closed once its shell has exited and its pipe
// has been drained; output written by its background processes more than one
// second (outputDrain) after the shell exited is discarded, so a background
// process holding stdout open never hangs Run.
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
// log cannot be opened, sh cannot be executed) has ExitCode -1, an Err, and
// fails the build.
//
// # Timeout, cancellation and the teardown budget
//
// Spec.Timeout bounds the non-teardown steps. When it expires, or when ctx is
// cancelled, the running step's process group gets SIGTERM and, after
// Spec.KillGrace, SIGKILL; the build ends StatusTimeout or StatusAborted.
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
