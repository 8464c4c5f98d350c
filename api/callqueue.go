package api

import "sync"

// callQueues holds, per key (a pipeline), the calls queued behind the one
// request to it in flight: the first caller of an idle key drains its
// queue, sending the calls queued meanwhile together (eventBatcher,
// admissionAsker).
type callQueues[C any] struct {
	mu     sync.Mutex
	queues map[string]*[]C
}

// join queues c under key and reports whether the key was idle: then the
// caller starts draining it (take, until it reports none left).
func (q *callQueues[C]) join(key string, c C) (first bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queues == nil {
		q.queues = map[string]*[]C{}
	}
	waiting, busy := q.queues[key]
	if !busy {
		waiting = new([]C)
		q.queues[key] = waiting
	}
	*waiting = append(*waiting, c)
	return !busy
}

// take removes and returns up to limit of key's queued calls, after
// dropping those keep refuses (nil: keeps all); none left ends the drain
// (the key is idle again, and the next caller drains it).
func (q *callQueues[C]) take(key string, limit int, keep func(C) bool) []C {
	q.mu.Lock()
	defer q.mu.Unlock()
	waiting := q.queues[key]
	if keep != nil {
		kept := (*waiting)[:0]
		for _, c := range *waiting {
			if keep(c) {
				kept = append(kept, c)
			}
		}
		*waiting = kept
	}
	if len(*waiting) == 0 {
		delete(q.queues, key)
		return nil
	}
	n := min(len(*waiting), limit)
	calls := (*waiting)[:n:n]
	*waiting = (*waiting)[n:]
	return calls
}

// waiting is how many calls wait under key (tests).
func (q *callQueues[C]) waiting(key string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w := q.queues[key]; w != nil {
		return len(*w)
	}
	return 0
}

// busy is how many keys are being drained (tests).
func (q *callQueues[C]) busy() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queues)
}
