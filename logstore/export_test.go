package logstore

import "time"

// SetWaiting makes s call f each time Wait is about to block, so a test
// can act once Wait really waits.
func SetWaiting(s *Store, f func()) { s.waiting = f }

// SetClock makes s stamp marks with now.
func SetClock(s *Store, now func() time.Time) { s.now = now }
