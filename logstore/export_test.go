package logstore

// SetWaiting makes s call f each time Wait is about to block, so a test
// can act once Wait really waits.
func SetWaiting(s *Store, f func()) { s.waiting = f }
