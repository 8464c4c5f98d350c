// Package cliout holds the pure part of the sluice CLI: aligned tables,
// compact durations and relative times, progress bars, the live view of an
// event (`sluice event watch`), the exit-code decision of `--wait`, the
// follower behind `sluice build logs --follow`, and the helpers that check
// flags and arguments with errors naming the flag at fault.
//
// Nothing here talks to the network or reads the clock: the starter package
// converts API answers into this package's small types, passes the current
// time in, and does the I/O. That keeps every formatting and decision rule
// unit-testable without linking Temporal.
package cliout
