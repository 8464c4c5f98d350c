// Package flock is an exclusive advisory file lock (flock(2)) that two
// processes, or two goroutines of one process, take in turn: the git mirror
// cache and sluice's SQLite store use it.
package flock
