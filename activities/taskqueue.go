package activities

import "strings"

// UntrustedSuffix ends the Temporal task queue of a queue's untrusted builds
// (pull requests from forks); workflows.UntrustedTaskQueue builds it.
const UntrustedSuffix = "@untrusted"

// queueTaskQueuePrefix starts the Temporal task queue of every named queue
// (workflows.QueueTaskQueue).
const queueTaskQueuePrefix = "queue/"

// SplitTaskQueue reads a build's Temporal task queue: the queue's name and
// whether it is the queue's untrusted task queue. ok is false for a task
// queue that is not a queue's.
func SplitTaskQueue(tq string) (queueName string, untrusted, ok bool) {
	name, ok := strings.CutPrefix(tq, queueTaskQueuePrefix)
	if !ok {
		return "", false, false
	}
	name, untrusted = strings.CutSuffix(name, UntrustedSuffix)
	return name, untrusted, true
}
