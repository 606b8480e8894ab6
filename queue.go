package headway

import (
	"context"
	"sync"
	"time"
)

// QueueOptions bound the queue that requests wait in for their key's next
// slot. Its zero value gives the documented defaults.
type QueueOptions struct {
	// MaxLen is the most requests that may wait on one key. A request that
	// finds the queue full fails at once with ErrQueueFull. Zero means
	// DefaultQueueLen; a negative value means no queue at all: a request
	// that cannot leave at once fails with ErrQueueFull.
	MaxLen int
	// MaxWait is the longest a request may wait for its slot. A request
	// whose known wait is longer fails at once with a *WaitError, and so
	// does one still waiting when MaxWait has passed. Zero means no bound
	// but the request context's deadline.
	MaxWait time.Duration
}

// DefaultQueueLen is the per-key queue bound used when QueueOptions.MaxLen
// is zero.
const DefaultQueueLen = 1024

// waiter is a request waiting in its key's queue. The fields below ready are
// guarded by the key's mutex.
type waiter struct {
	ready chan struct{} // receives once, when the waiter is admitted

	prev, next *waiter
	cost       int64
	arrival    int64 // when it joined the queue
	admitted   bool
}

// waitList is an intrusive FIFO of waiters, so that a cancelled waiter
// leaves from anywhere in O(1).
type waitList struct {
	head, tail *waiter
	n          int64 // waiters
	cost       int64 // their summed cost
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
}

// keyState is everything headway keeps for one key: its pacer, the queue in
// front of it and the requests in flight. One timer per key, armed only
// while the head of the queue waits for the pacer, wakes the queue; no
// goroutine waits on a request's behalf.
type keyState struct {
	t    *Transport
	lims []Limit

	mu       sync.Mutex
	pacer    pacer
	queue    waitList
	inflight int
	freedAt  int64 // when a full in-flight set last had a slot again
	timer    *time.Timer
	timerAt  int64 // when the armed timer fires; 0 when disarmed
	evicted  bool  // removed from the key table; look the key up again
}

// acquire waits until a request of the given cost may leave on k, or fails.
// On success the request holds one in-flight slot of k, which release gives
// back. errEvicted asks the caller to look the key up again.
func (k *keyState) acquire(ctx context.Context, cost int64) error {
	now := k.t.now()
	k.mu.Lock()
	if k.evicted {
		k.mu.Unlock()
		return errEvicted
	}
	// Fast path: nobody waits, a slot is free and the pacer allows it now.
	if k.queue.head == nil && k.hasSlot() {
		if d := k.pacer.earliest(now, 1, cost); d <= now {
			k.pacer.take(now, cost)
			k.occupy()
			k.mu.Unlock()
			return nil
		}
	}
	if err := k.admissible(ctx, now, cost); err != nil {
		k.mu.Unlock()
		return err
	}
	w := &waiter{ready: make(chan struct{}, 1), cost: cost, arrival: now}
	k.queue.pushBack(w)
	k.dispatch(now)
	k.mu.Unlock()
	return k.wait(ctx, w)
}

// admissible decides, under k.mu, whether a request that cannot leave at
// once may join the queue: the queue has room, the cost fits every burst,
// and the wait already known to be needed fits both MaxWait and the
// context's deadline.
func (k *keyState) admissible(ctx context.Context, now, cost int64) error {
	if i, ok := k.pacer.tooBig(cost); ok {
		return &CostError{Cost: int(cost), Limit: k.lims[i]}
	}
	opts := k.t.cfg.queue
	if opts.MaxLen < 0 || k.queue.n >= int64(opts.MaxLen) {
		return ErrQueueFull
	}
	wait := time.Duration(k.pacer.earliest(now, k.queue.n+1, k.queue.cost+cost) - now)
	if opts.MaxWait > 0 && wait > opts.MaxWait {
		return &WaitError{Wait: wait, Allowed: opts.MaxWait}
	}
	if dl, ok := ctx.Deadline(); ok {
		if left := dl.Sub(k.t.clock()); wait > left {
			return &WaitError{Wait: wait, Allowed: max(left, 0)}
		}
	}
	return nil
}

// wait blocks until w is admitted, its context ends or MaxWait passes.
func (k *keyState) wait(ctx context.Context, w *waiter) error {
	var expire <-chan time.Time
	if mw := k.t.cfg.queue.MaxWait; mw > 0 {
		tm := time.NewTimer(mw)
		defer tm.Stop()
		expire = tm.C
	}
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		k.abandon(w)
		return ctx.Err()
	case <-expire:
		k.abandon(w)
		mw := k.t.cfg.queue.MaxWait
		return &WaitError{Wait: mw, Allowed: mw}
	}
}

// abandon takes w out of the queue, or, if it was admitted meanwhile, gives
// back what it took, and lets the requests behind it move up.
func (k *keyState) abandon(w *waiter) {
	now := k.t.now()
	k.mu.Lock()
	if w.admitted {
		k.pacer.giveBack(now, w.cost)
		k.releaseLocked(now)
	} else {
		k.queue.remove(w)
	}
	k.dispatch(now)
	k.mu.Unlock()
}

// release gives back the in-flight slot a request held.
func (k *keyState) release() {
	now := k.t.now()
	k.mu.Lock()
	k.releaseLocked(now)
	k.dispatch(now)
	k.mu.Unlock()
}

// occupy and releaseLocked count the requests in flight, when a bound on
// them asks for it.
func (k *keyState) occupy() {
	if k.t.cfg.maxInFlight > 0 {
		k.inflight++
	}
}

func (k *keyState) releaseLocked(now int64) {
	m := k.t.cfg.maxInFlight
	if m <= 0 {
		return
	}
	if k.inflight == m {
		k.freedAt = now
	}
	k.inflight--
}

func (k *keyState) hasSlot() bool {
	m := k.t.cfg.maxInFlight
	return m <= 0 || k.inflight < m
}

// dispatch admits waiters from the head of the queue while they may leave
// at now, and arms the key's timer for the first one that must wait for the
// pacer. Called with k.mu held after anything that could let a waiter go.
//
// A waiter leaves at the instant it became free to leave, not at the
// instant the timer happened to run, so timer latency does not add up into
// drift over a long run.
func (k *keyState) dispatch(now int64) {
	for w := k.queue.head; w != nil; w = k.queue.head {
		if !k.hasSlot() {
			break // release dispatches again
		}
		d := k.pacer.earliest(max(w.arrival, k.freedAt), 1, w.cost)
		if d > now {
			k.arm(now, d)
			return
		}
		k.pacer.take(d, w.cost)
		k.occupy()
		k.queue.remove(w)
		w.admitted = true
		w.ready <- struct{}{}
	}
	k.disarm()
}

func (k *keyState) arm(now, at int64) {
	if k.timerAt == at {
		return
	}
	k.timerAt = at
	if k.timer == nil {
		k.timer = time.AfterFunc(time.Duration(at-now), k.onTimer)
		return
	}
	k.timer.Reset(time.Duration(at - now))
}

func (k *keyState) disarm() {
	if k.timerAt != 0 {
		k.timer.Stop()
		k.timerAt = 0
	}
}

func (k *keyState) onTimer() {
	now := k.t.now()
	k.mu.Lock()
	k.timerAt = 0
	k.dispatch(now)
	k.mu.Unlock()
}

// idle reports, under k.mu, whether k holds nothing that a new keyState
// would not: no waiter, nothing in flight, a full pacer.
func (k *keyState) idle(now int64) bool {
	return k.queue.head == nil && k.inflight == 0 && k.timerAt == 0 && k.pacer.idle(now)
}
