package headway

import (
	"context"
	"slices"
	"time"

	"github.com/headway-go/headway/ratelimitheader"
)

// A SharedQuota makes the pacing decisions of keys that must hold beyond one
// Transport: several processes calling one API with one token share one
// quota, and one pause, through it. Package sharedquota implements it over
// Redis; WithSharedQuota hands one to a Transport.
//
// The Transport still queues each request in its own process first (its
// queue, in-flight bound and local limits apply as they do without a
// SharedQuota), then asks the SharedQuota when the request may leave.
//
// Implementations must be safe for concurrent use, and must answer quickly
// or fail: a Transport never waits on a SharedQuota longer than the
// request's context allows.
type SharedQuota interface {
	// Reserve spends cost units of each of limits for one request on key,
	// in every process at once, and returns how long from now the request
	// must wait before it leaves. A Transport passes its limits with one
	// request of each burst held in reserve (a burst of 10 as 9).
	//
	// The caller can wait within at most. When the wait would be longer,
	// Reserve spends nothing and returns that wait (so a wait over within
	// always means nothing was spent): a slot that no request will use is
	// not taken from the other processes. Otherwise the units are spent
	// whether or not the caller waits. An error fails the request unsent,
	// unless the implementation chose to fail open (return 0, nil)
	// instead.
	Reserve(ctx context.Context, key string, limits []Limit, cost int, within time.Duration) (time.Duration, error)

	// Pause makes every process wait d from now before its next request on
	// key. A shorter pause never cuts a longer one short.
	Pause(ctx context.Context, key string, d time.Duration) error
}

// A SharedPauseChecker is a SharedQuota that can say whether a key is
// paused now. A Transport that slept on a reservation for 10 ms or
// longer asks it before the request leaves: a pause another process set
// meanwhile then holds the requests that had reserved before it too, not
// only those that reserve after it. A request found paused reserves again,
// so that the requests held leave after the pause one slot apart, not all
// at its end. A request that did not wait costs no extra call.
type SharedPauseChecker interface {
	// PausedFor returns how long from now every request on key must still
	// wait because of a pause; 0 when there is none. An error lets the
	// request leave at its reserved time, as if there were none.
	PausedFor(ctx context.Context, key string) (time.Duration, error)
}

// sharedRecheck is the shortest wait on a shared reservation after which a
// Transport asks a SharedPauseChecker again before the request leaves.
const sharedRecheck = 10 * time.Millisecond

// A SharedLearner is a SharedQuota that shares what one process learns from
// a key's responses with every process, so that all of them act on what any
// of them was told. A Transport calls Learn after each response that stated
// a quota (ratelimitheader.Signal.HasRemaining) or a policy (ratelimitheader.Signal.Limit per
// ratelimitheader.Signal.Period), never after one that said nothing about rate limits.
//
// The Signal is the response's, except for one field: when it reports an
// exhausted quota (Remaining 0) with a wait derived from its reset rather
// than stated outright, Wait is the time the key's model of the server
// expects before the next request is admitted: the reset for a window
// that refills at its end, less for one known to refill as it goes.
//
// A Transport also calls Learn after a bare throttle (Throttled, with no
// quota and no policy stated) on a key without limits of its own, whose
// model of the server knows nothing: the SharedLearner then paces the
// reservations of such keys for every process after it (it cuts the
// fleet's pace and lets it climb back, once for the fleet), and the
// Transport does not cut the key's own pace. When Learn fails, the
// Transport cuts the key's own pace, as it does without a SharedLearner.
//
// A key without limits whose model knows the quota from what the answers
// state is left, where no policy states the rate it refills at, paces
// each process by its own model, which sees the other processes' requests
// only as quota gone; together they overrun it. A throttle of such a key
// is passed to Learn as a bare one too (a Signal with Throttled alone),
// so that the fleet's pace is cut as it is for a bare throttle, besides
// what the response stated, which is shared as before.
//
// Learn is called on the response's path, so it should answer from memory
// when it has nothing new to share. Its error is otherwise ignored: what a
// process could not share it still acts on itself.
type SharedLearner interface {
	Learn(ctx context.Context, key string, sig ratelimitheader.Signal) error
}

// A SharedProber is a SharedQuota that shares the probes of a host that
// is down among every process, so that the fleet sends one probe at a
// time, not one per process (see RetryOptions.ProbeInterval). A Transport
// whose host goes down tells it so; every Transport holds its queue while
// it reports the host down; only the process granted the turn sends the
// probe; the probe's success ends the outage for all of them at once.
//
// A Transport asks HostState before each request leaves (from memory: it
// must not make a round trip), and the other methods only while its host
// is down, or as it goes down or comes back. An error leaves the Transport
// probing on its own, as it does without a SharedProber.
type SharedProber interface {
	// HostDown reports that a request on key found its host down, or that
	// its requests stall (go unanswered for much longer than usual; initial
	// is then how long the stall may last). The first report starts the
	// fleet's outage, its first probe due after initial; until a process
	// is given the turn, a report whose initial would bring the first probe
	// forward does. One from the process that holds the probe turn ends
	// the turn and puts the next probe twice the last interval from now,
	// up to most. Any other report changes nothing. None of it is
	// jittered: the fleet sends one probe at a time. It returns how long
	// from now the next probe is due.
	HostDown(ctx context.Context, key string, initial, most time.Duration) (time.Duration, error)

	// HostUp reports that a request on key sent after its host was found
	// down got an answer: the fleet's outage ends.
	HostUp(ctx context.Context, key string) error

	// ProbeTurn asks for the turn to send the next probe of key's host. It
	// returns 0 when this process has it, or when no outage is on;
	// otherwise how long from now to ask again.
	ProbeTurn(ctx context.Context, key string) (time.Duration, error)

	// HostState returns what this process knows of key's host, from
	// memory: whether it is down, and if so how long from now the fleet's
	// next probe is due (0 or less: due now).
	HostState(key string) (down bool, next time.Duration)
}

// A SharedVerdict is a SharedProber that shares what one process found
// the overloads of a key to be: answers 503 or 529 that name no delay,
// which a server that answers its floods so (nginx's limit_req, by
// default) sends for a limit, and a failing host for its failures. A
// Transport tries a pace on them before it takes them for a limit's
// refusals (see RetryOptions.ProbeInterval); across a fleet, each
// process's pace meets the refusals of the others' floods, and the trial
// of one that passed is enough for all of them. A Transport whose trial
// passed tells the fleet so with TellLimit; one whose overloads then come
// too often for a limit takes it back. A Transport that meets an overload
// while the fleet takes them for a limit's takes it for one too, unless
// its own overloads came too often for one not long before.
//
// HeardLimit is asked from memory, only as an overload is answered; an
// error of TellLimit leaves each process to its own trial.
type SharedVerdict interface {
	// TellLimit tells every process that key's overloads were found to
	// be a limit's refusals, for d from now; d of 0 or less takes it back.
	TellLimit(ctx context.Context, key string, d time.Duration) error

	// HeardLimit returns, from memory, how long from now key's overloads
	// are still taken for a limit's refusals: 0 or less, they are not.
	HeardLimit(key string) time.Duration
}

// WithSharedQuota makes every key take its pace from q as well as from its
// own limits, and share its pauses through q. The key given to q is the
// key of KeyFunc: use one that names the quota (the token, say), the same
// in every process.
func WithSharedQuota(q SharedQuota) Option {
	return optionFunc(func(c *config) { c.shared = q })
}

// reserveShared asks the shared quota, if any, when a request on k may
// leave, and waits until then; after a wait of sharedRecheck or more, a
// pause set meanwhile makes it reserve again (see SharedPauseChecker).
// Only a slot the request can use is taken: one within its deadline, what
// is left of QueueOptions.MaxWait since it queued, and the longest wait
// the Transport sleeps on (WithMaxServerWait); it fails at once with a
// WaitError when the shared wait is longer.
func (t *Transport) reserveShared(ctx context.Context, key string, k *keyState, cost int64, queued time.Time) error {
	q := t.cfg.shared
	if q == nil {
		return nil
	}
	within := func() time.Duration {
		w := t.cfg.maxRetryAfter
		if w <= 0 {
			w = defaultMaxWait
		}
		if mw := t.cfg.queue.MaxWait; mw > 0 {
			w = min(w, mw-time.Since(queued))
		}
		if dl, ok := ctx.Deadline(); ok {
			w = min(w, time.Until(dl))
		}
		return max(w, 0)
	}
	allowed := within()
	lims := k.sharedLims
	wait, err := q.Reserve(ctx, key, lims, int(cost), allowed)
	if err != nil {
		return err
	}
	pc, _ := q.(SharedPauseChecker)
	for {
		if wait > allowed {
			return &WaitError{Wait: wait, Allowed: allowed}
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		if pc == nil || wait < sharedRecheck {
			return nil
		}
		if p, err := pc.PausedFor(ctx, key); err != nil || p <= 0 {
			return ctx.Err() // an error leaves the request at its slot
		}
		// Paused since the reservation: take a slot after the pause, in
		// turn with the others held, rather than leaving with all of them
		// the moment it ends.
		allowed = within()
		if wait, err = q.Reserve(ctx, key, lims, int(cost), allowed); err != nil {
			return err
		}
	}
}

// pauseShared tells the shared quota, if any, of a pause on key.
func (t *Transport) pauseShared(ctx context.Context, key string, sig *ratelimitheader.Signal) {
	if q := t.cfg.shared; q != nil && sig.Throttled && sig.HasWait && sig.Wait > 0 {
		// A failure to share the pause leaves it local: nothing to do.
		_ = q.Pause(context.WithoutCancel(ctx), key, min(sig.Wait, t.cfg.maxRetryAfter))
	}
}

// learnShared tells the shared quota, if it learns, what a response to a
// request on k said about its quota: only a response that stated one.
func (t *Transport) learnShared(ctx context.Context, key string, k *keyState, dep departure, sig *ratelimitheader.Signal) {
	l, ok := t.cfg.shared.(SharedLearner)
	if !ok {
		return
	}
	if k.fleetPaced && sig.Throttled {
		switch bare, overran := k.fleetThrottle(sig, &dep); {
		case bare:
			s := *sig
			s.Wait = min(s.Wait, t.cfg.maxRetryAfter)
			err := l.Learn(context.WithoutCancel(ctx), key, s)
			k.settleBare(bareThrottle{now: t.now(), seq: dep.seq, wait: s.Wait, hasWait: s.HasWait}, err == nil)
			return
		case overran:
			// The fleet overran a quota that each process sees only as
			// what is left: its pace is cut as by a bare throttle, with
			// the wait the throttle named (a run of them through a block
			// backs off from it).
			bare := ratelimitheader.Signal{Throttled: true, HasWait: sig.HasWait}
			if sig.HasWait {
				bare.Wait = min(sig.Wait, t.cfg.maxRetryAfter)
			}
			_ = l.Learn(context.WithoutCancel(ctx), key, bare)
		}
	}
	if !sig.HasRemaining && (sig.Limit <= 0 || sig.Period <= 0) {
		return
	}
	s := *sig
	if s.HasRemaining && s.Remaining == 0 && s.HasWait && !s.RetryAfter {
		s.Wait = min(s.Wait, k.modelWait(t.now()))
	}
	s.Wait = min(s.Wait, t.cfg.maxRetryAfter) // shared no longer than it holds the key here
	_ = l.Learn(context.WithoutCancel(ctx), key, s)
}

// withReserve returns the limits a key reserves in the shared quota: lims
// with one request of each burst of two or more held in reserve, as a
// key's model of the server does on its own (see serverModel.earliest).
// A fleet that spends the server's exact burst at once, then one slot an
// interval, leaves no room for a request of one process that reaches the
// server a little before its slot (the processes' requests take different
// paths from Redis to the server, and the server's bucket starts when the
// first of them arrives): each such request is a throttle, and its pause
// the whole fleet's. The reserve costs one interval, once. Every process
// reserves the same limits, so they share one schedule.
func withReserve(lims []Limit) []Limit {
	var out []Limit
	for i, l := range lims {
		if l.Burst < 2 {
			continue
		}
		if out == nil {
			out = slices.Clone(lims)
		}
		out[i].Burst--
	}
	if out == nil {
		return lims
	}
	return out
}
