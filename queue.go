package headway

import (
	"sync/atomic"
	"time"
)

// QueueOptions bound the queue that requests wait in for their key's next
// slot. Its zero value gives the documented defaults.
type QueueOptions struct {
	// MaxLen is the most requests that may wait on one key. A request that
	// finds the queue full fails at once with ErrQueueFull. Zero means
	// 1024; a negative value means no queue at all: a request
	// that cannot leave at once fails with ErrQueueFull.
	MaxLen int
	// MaxWait is the longest a request may wait for its slot. A request
	// whose known wait is longer fails at once with a *WaitError, and so
	// does one still waiting when MaxWait has passed. Zero means no bound
	// but the request context's deadline.
	MaxWait time.Duration
}

// defaultQueueLen is the per-key queue bound used when QueueOptions.MaxLen
// is zero.
const defaultQueueLen = 1024

// waiter is a request waiting in its key's queue. The fields below ready are
// guarded by the key's mutex.
type waiter struct {
	ready chan struct{} // receives once, when the waiter is admitted

	prev, next *waiter
	cost       int64
	arrival    int64     // when it joined the queue
	route      string    // the request's path, for the server's buckets
	dep        departure // once admitted
	deadline   int64     // when it must have left, by its context or MaxWait; 0: never
	admitted   bool
	err        error // why it failed in the queue, instead of being admitted
}

// waitList is an intrusive FIFO of waiters, so that a cancelled waiter
// leaves from anywhere in O(1).
type waitList struct {
	head, tail *waiter
	n          int64       // waiters
	cost       int64       // their summed cost
	busy       atomic.Bool // head != nil, read without the key's lock
}

func (l *waitList) pushBack(w *waiter) {
	w.prev, w.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = w
	} else {
		l.head = w
	}
	l.tail = w
	l.n++
	l.cost += w.cost
	l.busy.Store(true)
}

func (l *waitList) pushFront(w *waiter) {
	w.prev, w.next = nil, l.head
	if l.head != nil {
		l.head.prev = w
	} else {
		l.tail = w
	}
	l.head = w
	l.n++
	l.cost += w.cost
	l.busy.Store(true)
}

func (l *waitList) remove(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	w.prev, w.next = nil, nil
	l.n--
	l.cost -= w.cost
	if l.head == nil {
		l.busy.Store(false)
	}
}
