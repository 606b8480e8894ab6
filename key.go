package headway

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headway-go/headway/ratelimitheader"
	"github.com/sony/gobreaker/v2"
)

// keyEnv is what a key needs of the Transport that holds it, and all it
// gets: the pacer's clock, the configuration, the outage probes' schedule
// and the table of hosts with the end of their longest pause. A key never
// sees the Transport itself.
type keyEnv struct {
	cfg   config
	probe probeSchedule
	fleet SharedProber // the shared quota, if it shares outages; nil without the outage state
	// verdict: fleet, if it shares what a key's overloads are.
	verdict SharedVerdict
	hosts   hostTable
	epoch   time.Time // the origin of the pacer's clock (see now)

	scopePauses atomic.Int64 // the end of the longest scope pause, on the pacer's clock
	// scopesActive: some scope counts its departures (see scoped), set
	// before its scopeState.active.
	scopesActive atomic.Bool
	// connsEpoch counts the changes of the hosts' conns: while it stays,
	// a key's copy of its host's holds (see hostConns).
	connsEpoch atomic.Uint64
	// connless counts the hosts in a row whose first watched answer came
	// with no GotConn: a base that is not net/http's (see watchConns).
	connless atomic.Int32
	// learningHosts counts the hosts that learn their clock's offset (see
	// hostState.learns): while none does, an answer that says nothing
	// reads no host's memory (see readsDate).
	learningHosts atomic.Int64

	// budgetWidth is the width of the buckets of every key's retry budget,
	// in nanoseconds: read here, a request leaves the budget's memory
	// alone (see countRequest). 0: budgets are off.
	budgetWidth int64
}

// keyState is everything headway keeps for one key: its pacer, the queue in
// front of it and the requests in flight. One timer per key, armed only
// while the head of the queue waits for the pacer, wakes the queue; no
// goroutine waits on a request's behalf.
type keyState struct {
	// First, what every request of a key far below its limits reads or
	// writes (acquire's fast path and takePlain, prepare, sendPlain and
	// the answer's settle; release with a bound on requests in flight),
	// out's first 40 bytes the last of it: 304 bytes, on five cache lines
	// as the runtime lays a key out, 8 bytes into its slot, after its
	// header. With many keys in use, a line a request touches is likely
	// out of the CPU's nearer caches (TestAKeysHotFieldsAreFew counts
	// them).
	env  *keyEnv
	host *hostState // host.name is its host
	// conns is a copy of host.conns, made while keyEnv.connsEpoch was
	// epoch: epoch+1 << 2 | conns; 0 for none (see hostConns).
	conns atomic.Uint64
	mu    sync.Mutex
	// The first attempts of the current budget bucket, counted here, next
	// to the lock every request takes, and handed to budget when the bucket
	// ends or a retry asks: the budget's own memory stays cold, and is
	// made only then (see retryBudget).
	budgetIdx atomic.Int64
	budgetCur atomic.Int64
	budget    atomic.Pointer[retryBudget]
	sent      uint64 // departures so far; the last one's number
	pacer     pacer
	// pending: the departures whose outcome the key has not yet taken
	// in, and when the silence a stall is counted in began (see
	// stalls), one word: a departure's take and the answer that ends
	// a silence each change both at once.
	pending  atomic.Uint64
	learning atomic.Bool // answers that say nothing count: in the window, or in a cycle (aimd.holds)
	sampling atomic.Bool // a request is held to read the server's clock (see windowSample)
	probing  atomic.Bool // no response has come yet
	// striking: strikes is not nil, read without the lock.
	striking atomic.Bool
	// thrN counts the throttles taken in (under mu): with sent and
	// pending, what came back that was no throttle, for the measure of a
	// throttle whose key kept no answers (see concThrottle).
	thrN uint32
	// statedUntil is the end of the last wait a server named that was
	// longer than the cap (WithMaxServerWait); 0 when none. The key is
	// held for the cap at most; a request whose wait would be longer fails
	// at once (see holdStated).
	statedUntil int64
	queue       waitList
	inflight    int32 // counted only with a bound on it
	// capping: the key measures its throttles for a cap on the requests
	// out, or holds one (see concLimit): its answers take the lock.
	capping atomic.Bool
	strikes *strikes // throttles in a row; nil: none (see strikes.go)
	evicted bool     // removed from the key table; look the key up again
	// rare holds a bit for each rarely-true state that acquire's fast path
	// (see takePlain) does not look at, under mu. dispatch, which runs at
	// the end of every locked change of the key's state, sets it from the
	// state (see rareNow); a bit for a state that has ended since costs
	// only the general path, until the next dispatch clears it.
	rare uint8
	// msModel: model learned only from answers read after the host's bare
	// resets proved to count milliseconds (see millisecondResets); in the
	// byte before firstSeq that alignment leaves free.
	msModel bool
	// fleetPaced: the key has no limits and its shared quota learns, so
	// the pace after bare throttles is the fleet's (see SharedLearner),
	// and the key cuts its own only for a throttle it could not share.
	fleetPaced bool
	firstSeq   uint32 // the first departure's number, truncated; 0: none yet, or it was not sent
	timerAt    int64  // when the armed timer fires; 0 when disarmed
	out        outage // whether its host is down; see outage.go

	// Then the rest, but for model's deps and window's taken and lastAt,
	// which every departure writes: model's last field and window's first
	// two, on one cache line.
	model  serverModel   // what the server says is left
	window learnedWindow // a fixed window learned from the throttles' waits

	scope *scopeState // the keys of its credential on its host (see scoped)
	lims  []Limit
	// sharedLims are the limits reserved in the shared quota: lims, one
	// request of each burst held in reserve (see sharedLimits).
	sharedLims []Limit
	buckets    *bucketModels // the server's named buckets; nil until one is named
	aimd       aimd          // the pace learned from bare throttles
	aimdB      bucket        // aimd's pace, as a bucket of burst 1 that counts requests
	firstAt    int64         // when the first departure left
	br         *breaker      // nil without WithBreaker
	freedAt    int64         // when a full in-flight set last had a slot again
	timer      *time.Timer

	sample dateSampling // the next request that reads the server's clock

	accidents *accidents // the bare throttles of a key with configured limits; nil: none

	conc *concLimit // a cap on the requests out, learned; nil: none yet
}

// bareThrottle is what a key's own AIMD needs to take a bare throttle in:
// its time, the departure throttled, the end of the pause before it, and
// the wait the server named, if any.
type bareThrottle struct {
	now        int64
	seq        uint64
	at         int64 // when seq left, if atKnown
	atKnown    bool
	pausedTill int64
	wait       time.Duration
	hasWait    bool
	unpaced    bool   // it left under a learned cap, not at the pace (see concMeasured)
	sent       uint64 // departures of the key when it came; 0: as many as now
}

// acquire waits until a request of the given cost may leave on k, or fails.
// On success the request holds one in-flight slot of k, which release gives
// back, and acquire writes its departure to dep. A retry goes to the front
// of the queue, ahead of new work. until, when not 0, is the latest the
// request may leave on the pacer's clock, besides its context's deadline
// and MaxWait: the end of MaxElapsed, for a retry held by an outage.
// errEvicted asks the caller to look the key up again. early says that a
// request that leaves at once is sent at once, with nothing between, and
// that the stall rule is on (see keyState.sending).
func (k *keyState) acquire(ctx context.Context, cost int64, front, early bool, until int64, route string, dep *departure) error {
	now := k.env.now()
	k.mu.Lock()
	if k.evicted {
		k.mu.Unlock()
		return errEvicted
	}
	if i, ok := k.pacer.tooBig(cost); ok {
		k.mu.Unlock()
		return &CostError{Cost: int(cost), Limit: k.lims[i]}
	}
	if k.statedUntil > now {
		if err := k.holdStated(now); err != nil {
			k.mu.Unlock()
			return err
		}
	}
	// Fast path: nobody waits, a slot is free and the pacer allows it now.
	// With nothing unanswered and no probe out, the host's health does not
	// hold it (see outageGate).
	if k.queue.head == nil && k.hasSlot() && (!k.silent() && !k.out.probing || k.outageGate(now)) && k.strikeGate() {
		if k.rare == 0 && !k.scoped(now) {
			// Nothing rare holds (see rare): the pacer alone says.
			if verifyRare {
				k.verifyPlain(now, cost, route)
			}
			if k.pacer.pauseUntil <= now && k.pacer.buckets.TakeNow(now, cost) {
				k.takePlain(now, dep)
				if early {
					dep.began = k.depart(1, now) // see sending
				} else {
					k.pending.Add(1)
				}
				k.departed(dep)
				k.mu.Unlock()
				return nil
			}
		} else if d := k.earliest(now, 1, cost, route); d <= now {
			if k.take(now, now, cost, route, dep) {
				dep.direct = true
				k.mu.Unlock()
				return nil
			}
		}
	}
	if err := k.admissible(ctx, now, cost, front, until, route); err != nil {
		k.mu.Unlock()
		return err
	}
	w := &waiter{ready: make(chan struct{}, 1), cost: cost, arrival: now, route: route}
	w.deadline = k.deadline(ctx, now, until)
	if front {
		k.queue.pushFront(w)
	} else {
		k.queue.pushBack(w)
	}
	k.dispatch(now)
	k.mu.Unlock()
	if err := k.wait(ctx, w); err != nil {
		return err
	}
	*dep = w.dep
	return nil
}

// departure is a request's leave to go: its number on the key, and when it
// was free to go on the pacer's clock (it goes no earlier); with the
// server's bucket that paced it, its number there.
type departure struct {
	seq    uint64
	at     int64
	sent   int64 // when it went: at, or later if the key let it go late
	sub    *bucketModel
	subSeq uint64
	// direct: it left on acquire's fast path, and sent is the clock read
	// of the goroutine that sends it, taken just before.
	direct bool
	// probeRoute is the route of a key whose server names buckets, when
	// this is the route's first request: its others wait for its answer.
	probeRoute string
	// scopeSeq is its number in its scope, once the scope counts; 0 if not.
	scopeSeq uint64
	// began: it began the silence a stall is counted in as it left (see
	// keyState.sending).
	began bool
	// gaveUp: its caller gave up before an answer came (see call.gaveUp).
	gaveUp bool
	// flight is how many of the key's requests were out as it left,
	// itself included, and okAt how many had come back by then that were
	// no throttles (see concLimit).
	flight, okAt uint32
}

// earliest returns when n requests costing cost in all may leave on route,
// at the earliest, by every constraint on k but the in-flight bound: its
// limits, its pauses and its host's, what the server says is left, and the
// pace learned from bare throttles.
func (k *keyState) earliest(now, n, cost int64, route string) int64 {
	return k.earliestFor(now, n, cost, route, true)
}

// earliestFor is earliest; with own false, it leaves out what holds route
// alone on a key whose server names buckets (see routeHeld): the bucket
// that paces it, or the key's model for a route not mapped to one.
func (k *keyState) earliestFor(now, n, cost int64, route string, own bool) int64 {
	d := k.pacer.earliest(now, n, cost)
	if now < k.env.scopePauses.Load() {
		d = max(d, k.scope.pauseUntil.Load()) // some scope is paused: maybe this one
	}
	if k.probing.Load() && k.firstSeq != 0 {
		// A key that knows nothing of its server yet sends one request and
		// waits for its answer before sending more, but not for long: a
		// slow first answer (a long call) must not hold the others up.
		d = max(d, satAdd(k.firstAt, int64(probeWait)))
	}
	if k.buckets != nil {
		if at := k.buckets.routeProbe(route); at != 0 {
			d = max(d, satAdd(at, int64(probeWait)))
		}
	}
	if m, b := k.modelFor(route); m.known && (own || k.buckets == nil) {
		k.preciseResets(m)
		need := float64(n)
		if b != nil {
			// The first request of a route not answered yet may be counted
			// by this bucket (see bucketModels): it keeps one for each.
			need += float64(len(k.buckets.probes))
		}
		if md := m.earliest(d, need); md > d {
			d = md
			m.held = true
		}
		if b == nil {
			d = k.dateSample(d, m)
		}
	}
	if k.scope.active.Load() {
		d = k.scope.earliest(d)
	}
	if k.window.on {
		if k.window.dated {
			// Its ends are instants on the server's clock: they move with
			// the estimate of its offset, which Dates narrow.
			if off, ok := k.host.clockOffset(k.env.wall(d)); ok {
				k.window.reclock(int64(off))
			}
		}
		d = k.windowSample(max(d, k.window.earliest(d)))
	} else if k.aimd.active {
		hold, alone := k.aimd.holds(d, k.sent)
		if !alone && !k.aimd.freeFor(n, d) {
			d = k.aimdB.Earliest(d, n, cost)
		}
		if !hold {
			var from int64
			hold, from = k.aimd.serial(d, k.sent)
			d = max(d, from)
		}
		if hold {
			d = max(d, satAdd(k.window.lastAt, int64(probeWait))) // or until the answers come (see answeredNow)
		}
	}
	pace, span := k.window.firstCycle(k.firstAt)
	if at, ok := k.window.probeAt(d, satAdd(k.window.lastAt, k.window.probeCap(int64(probeWait), pace, span))); ok {
		d = max(d, at) // until the answers to the ones before come (see answered)
	}
	return k.outageFloor(k.strikeFloor(d))
}

// millisecondResets makes m, the model of k, forget what it took from
// resets read in seconds, once its host's bare resets proved to count
// milliseconds (see hostState.learnResetUnit): a window a thousand times
// its length, and the waits beyond the cap it named (statedUntil), would
// hold the key for the cap. It learns again from the next answer, read
// right. Called with k.mu held.
func (k *keyState) millisecondResets(m *serverModel) {
	if k.msModel || !k.host.msDeltas.Load() {
		return
	}
	k.msModel = true
	*m = serverModel{}
	k.statedUntil = 0
}

// preciseResets makes m, a model of k, read its resets as stated to the
// millisecond once its host has stated one so (see resetPrecision), if
// all of its own answers so far happened to be whole seconds: a window
// seen only in such answers (the first request of a window, counted right
// at its start, is told 1.000) has no measured gap, and its quota left
// would be spent up to its stated reset, after the boundary the server
// counts from. Its boundary lies within maxGap before that reset, as far
// as an answer's flight goes; the next answer stated to the millisecond
// narrows it.
func (k *keyState) preciseResets(m *serverModel) {
	if !m.msReset && k.host.msResets.Load() {
		m.msReset = true
		if !m.gapSet && m.resetSeen > 0 {
			m.gap, m.gapSet = int32(maxGap), true
		}
	}
}

// take records a departure on route at d (the instant it was free to go,
// for the pacer) and now (when it goes, for what the server will count),
// into dep. It reports false, and records nothing, when another key of its
// scope took what the scope's global window let go at d since k looked.
func (k *keyState) take(d, now, cost int64, route string, dep *departure) bool {
	var scopeSeq uint64
	if k.scope.active.Load() {
		var ok bool
		if scopeSeq, ok = k.scope.take(d, max(d, now)); !ok {
			return false
		}
	}
	k.pacer.take(d, cost)
	*dep = departure{seq: k.sent + 1, at: d, sent: max(d, now), scopeSeq: scopeSeq}
	if k.buckets != nil && k.buckets.probe(max(d, now), route) {
		dep.probeRoute = route
	}
	if m, b := k.modelFor(route); b != nil {
		b.sent++
		dep.sub, dep.subSeq = b, b.sent
		m.take(max(d, now), b.sent)
		k.model.note(max(d, now), dep.seq) // what the key sent, for the pace of bare throttles
	} else {
		m.take(max(d, now), dep.seq)
	}
	k.window.take(d)
	k.sampled(max(d, now))
	if k.aimd.active {
		k.aimdB.Interval = k.aimd.interval(d)
		free := k.aimd.left(d)
		k.aimd.mark(k.sent+1, max(d, now))
		if free {
			// What a wait brought back: the pace goes on after it, from
			// when it left. Those that leave after the wait's end (the
			// workers' requests come back to the key after it) leave
			// later than d: paced from d, the next went with them, one
			// more at once than the wait brought back (a window of 30 a
			// second entered late, with 32 workers: 0.881 -> 0.924).
			k.aimdB.TAT = max(k.aimdB.TAT, satAdd(max(d, now), k.aimdB.Interval))
		} else {
			k.aimdB.Take(d, cost)
		}
	}
	if k.firstSeq == 0 {
		k.firstAt, k.firstSeq = d, max(uint32(k.sent+1), 1)
	}
	k.sent++
	k.outageTake(k.sent)
	k.strikeTake(k.sent)
	k.pending.Add(1)
	k.departed(dep)
	k.occupy()
	return true
}

// takePlain is take for a request that leaves at now on acquire's fast
// path, when nothing rare holds (see rare), once its pacer took it: the
// departure and what take counts in every case, but pending, which the
// caller counts.
func (k *keyState) takePlain(now int64, dep *departure) {
	k.sent++
	*dep = departure{seq: k.sent, at: now, sent: now, direct: true}
	if m := k.model.deps; m != nil {
		m[k.sent%depRing] = depRecord{seq: k.sent, at: now} // see serverModel.take
	}
	k.window.taken++ // see learnedWindow.take
	k.window.lastAt = now
	k.occupy()
}

// The bits of keyState.rare: the states under which a departure needs
// more than its pacer (see earliest and take).
const (
	rareStated  uint8 = 1 << iota // a wait the server named is held (see holdStated)
	rareFirst                     // the first departure, or its answer, is awaited
	rareWindows                   // the pacer counts fixed windows
	rareModel                     // the server's quota, or its buckets, are known
	rareLearned                   // a pace or a window is learned from throttles
	rareOutage                    // the host is down
	rareStrikes                   // throttles came in a row (see strikes)
	rareCapped                    // a cap on the requests out is learned (see concLimit)
)

// rareNow returns, under k.mu at now, the bits of rare whose states hold.
func (k *keyState) rareNow(now int64) uint8 {
	var r uint8
	if k.statedUntil > now {
		r |= rareStated
	}
	if k.probing.Load() || k.firstSeq == 0 {
		r |= rareFirst
	}
	if k.pacer.win != nil {
		r |= rareWindows
	}
	if k.model.known || k.buckets != nil || k.sample.at > 0 {
		r |= rareModel
	}
	if k.aimd.active || k.window.on || (k.window.curEnd != 0 && !k.window.off) {
		r |= rareLearned
	}
	if k.out.down || k.out.probing {
		r |= rareOutage
	}
	if k.strikes != nil {
		r |= rareStrikes
	}
	if k.conc != nil && k.conc.cap > 0 {
		r |= rareCapped
	}
	return r
}

// scoped reports whether k's scope may hold a departure at now: another
// key of its credential paused it, or counts it. While no scope of the
// Transport counts its departures, it reads no scope's memory.
func (k *keyState) scoped(now int64) bool {
	return now < k.env.scopePauses.Load() || k.env.scopesActive.Load() && k.scope.active.Load()
}

// verifyRare makes acquire check, on its fast path, that nothing rare
// holds and that the general path would let the request go at once too.
// The package's tests set it.
var verifyRare bool

func (k *keyState) verifyPlain(now, cost int64, route string) {
	if r := k.rareNow(now); r != 0 {
		panic(fmt.Sprintf("headway: key state %#x not in its rare bits", r))
	}
	plain := k.pacer.pauseUntil <= now && k.pacer.buckets.Earliest(now, 1, cost) <= now
	if d := k.earliest(now, 1, cost, route); (d <= now) != plain {
		panic(fmt.Sprintf("headway: the fast path (%v) and earliest (%d) disagree at %d", plain, d, now))
	}
}

// seen notes that the outcome of a departure that was sent has been taken
// in (its response observed, or its failure): until then the key is not
// idle, since what the response says would update it. The answer ends the
// silence a stall is counted in (see stalls); if a stall held the queue,
// settle, which comes first, let it go on.
func (k *keyState) seen() {
	for {
		u := k.pending.Load()
		if k.pending.CompareAndSwap(u, (u-1)&unseenMask) {
			return
		}
	}
}

// seenDep is seen for dep, answered without a throttle if ok: a
// departure whose caller gave up before an answer came is no answer, and
// ends no silence but one left with nothing out (see withdraw).
func (k *keyState) seenDep(dep *departure, ok bool) {
	if dep.gaveUp {
		k.withdraw()
	} else {
		k.seen()
	}
	if k.capping.Load() {
		k.concFreed(dep, ok && !dep.gaveUp)
	}
}

// unseenN returns how many departures of k have not had their outcome
// taken in.
func (k *keyState) unseenN() uint64 { return k.pending.Load() & unseenMask }

// admissible decides, under k.mu, whether a request that cannot leave at
// once may join the queue: the queue has room, the cost fits every burst,
// and the wait already known to be needed fits MaxWait, the context's
// deadline and until (see acquire).
func (k *keyState) admissible(ctx context.Context, now, cost int64, front bool, until int64, route string) error {
	opts := k.env.cfg.queue
	if !front && (opts.MaxLen < 0 || k.queue.n >= int64(opts.MaxLen)) {
		return ErrQueueFull
	}
	n, ahead := k.queue.n+1, k.queue.cost+cost
	if front {
		n, ahead = 1, cost
	}
	wait := time.Duration(k.earliest(now, n, ahead, route) - now)
	if next, ok := k.nextProbe(); ok && k.out.fleet {
		wait = max(wait, time.Duration(next-now)) // the fleet's probe
	}
	var err *WaitError
	if opts.MaxWait > 0 && wait > opts.MaxWait {
		err = &WaitError{Wait: wait, Allowed: opts.MaxWait}
	} else if dl, ok := ctx.Deadline(); ok {
		if left := dl.Sub(k.env.clock()); wait > left {
			err = &WaitError{Wait: wait, Allowed: max(left, 0)}
		}
	}
	if err == nil && until != 0 && int64(wait) > until-now {
		err = &WaitError{Wait: wait, Allowed: time.Duration(max(until-now, 0))}
	}
	if err == nil {
		return nil
	}
	if next, ok := k.nextProbe(); ok && next >= now+int64(wait) {
		err.NextProbe = k.env.wall(next) // the host is down: the wait is for its probe
	}
	return err
}

// wait blocks until w is admitted, its context ends or MaxWait passes.
func (k *keyState) wait(ctx context.Context, w *waiter) error {
	var expire <-chan time.Time
	if mw := k.env.cfg.queue.MaxWait; mw > 0 {
		tm := time.NewTimer(mw)
		defer tm.Stop()
		expire = tm.C
	}
	select {
	case <-w.ready:
		return w.err
	case <-ctx.Done():
		k.abandon(w)
		return ctx.Err()
	case <-expire:
		k.abandon(w)
		mw := k.env.cfg.queue.MaxWait
		return &WaitError{Wait: mw, Allowed: mw}
	}
}

// abandon takes w out of the queue, or, if it was admitted meanwhile, gives
// back what it took, and lets the requests behind it move up. A waiter
// already sent out of the queue with an error is not in it any more.
func (k *keyState) abandon(w *waiter) {
	now := k.env.now()
	k.mu.Lock()
	if w.admitted {
		k.scope.answered(w.dep.scopeSeq, 0, now) // none will come
		if bs := k.buckets; bs != nil && w.dep.probeRoute != "" {
			delete(bs.probes, w.dep.probeRoute)
		}
		k.pacer.giveBack(now, w.cost)
		k.releaseLocked(now)
		k.settleLocked(now, w.dep.seq, hostUnsent, false) // what was out is still unanswered
		k.strikeUnsent(w.dep.seq)
		k.withdraw()
	} else if len(w.ready) == 0 {
		k.queue.remove(w)
	} // else it left the queue with an error: the caller's is as good
	k.dispatch(now)
	k.mu.Unlock()
}

// giveBack returns to k's limits the cost of a request that was admitted
// and then not sent (see slot.unsent), as abandon does for one whose
// context ended as it was admitted: the next request need not wait for a
// slot that nobody used.
func (k *keyState) giveBack(cost int64) {
	now := k.env.now()
	k.mu.Lock()
	k.pacer.giveBack(now, cost)
	k.dispatch(now)
	k.mu.Unlock()
}

// release gives back the in-flight slot a request held.
func (k *keyState) release() {
	if k.env.cfg.maxInFlight <= 0 {
		return
	}
	now := k.env.now()
	k.mu.Lock()
	k.releaseLocked(now)
	if k.queue.head == nil {
		// dispatch with nobody to let go: the slot is none of rare's
		// states, and nothing else changed.
		k.disarm()
	} else {
		k.dispatch(now)
	}
	k.mu.Unlock()
}

// occupy and releaseLocked count the requests in flight, when a bound on
// them asks for it.
func (k *keyState) occupy() {
	if k.env.cfg.maxInFlight > 0 {
		k.inflight++
	}
}

func (k *keyState) releaseLocked(now int64) {
	m := k.env.cfg.maxInFlight
	if m <= 0 {
		return
	}
	if int(k.inflight) == m {
		k.freedAt = now
	}
	k.inflight--
}

func (k *keyState) hasSlot() bool {
	m := k.env.cfg.maxInFlight
	return (m <= 0 || int(k.inflight) < m) && (k.rare&rareCapped == 0 || k.concSlot())
}

// dispatch admits waiters from the head of the queue while they may leave
// at now, and arms the key's timer for the first one that must wait for the
// pacer. Called with k.mu held after anything that could let a waiter go.
//
// A waiter leaves at the instant it became free to leave, not at the
// instant the timer happened to run, so timer latency does not add up into
// drift over a long run.
func (k *keyState) dispatch(now int64) {
	k.dispatchQueue(now)
	k.rare = k.rareNow(now)
}

func (k *keyState) dispatchQueue(now int64) {
	var held routeHolds
	for w := k.queue.head; w != nil; {
		if !k.hasSlot() {
			break // release dispatches again
		}
		if !k.outageGate(now) {
			if k.out.probing && (!k.out.replaying || k.out.down) {
				break // the probe's answer dispatches again
			}
			// A stall or a replay: the next answer dispatches again, or
			// the timer.
			return
		}
		if !k.strikeGate() {
			break // the try's answer dispatches again
		}
		next := w.next
		var group *bucketModel
		if k.buckets != nil {
			group = k.routeGroup(w.route)
			if held.has(group) {
				w = next // behind a request of its bucket that waits
				continue
			}
		}
		d := k.earliest(max(w.arrival, k.freedAt), 1, w.cost, w.route)
		if d == math.MaxInt64 {
			if k.probing.Load() {
				break // until the answer comes
			}
			d = satAdd(now, int64(time.Second)) // look again
		}
		if d > now {
			if at, ok := k.routeHeld(now, d, w); ok && held.add(group, d) {
				w = next
				continue
			} else if !ok {
				// Held by the key until at: dispatch looks again then, and
				// may pass w if its route still holds it.
				d = min(d, at)
			}
			k.arm(now, held.wake(d))
			return
		}
		// d may lie before now (the pacer's clock runs from the arrival),
		// but the server counts the request when it leaves: what its
		// model holds then says, not what it held at d. Another
		// constraint that moved d (the scope's window, say) may have
		// moved it past a boundary the model was asked about before.
		if m, _ := k.modelFor(w.route); m.known {
			if md := m.earliest(now, 1); md > now {
				m.held = true
				if k.buckets != nil && md-now > int64(maxGap) && held.add(group, md) {
					w = next
					continue
				}
				k.arm(now, held.wake(md))
				return
			}
		}
		if !k.take(d, now, w.cost, w.route, &w.dep) {
			// Another key of its scope took the slot since: look again
			// when the scope lets the next go.
			d = max(k.earliest(max(w.arrival, k.freedAt), 1, w.cost, w.route), satAdd(now, 1))
			k.arm(now, held.wake(d))
			return
		}
		k.queue.remove(w)
		w.admitted = true
		w.ready <- struct{}{}
		w = next
	}
	if at := held.wake(math.MaxInt64); at != math.MaxInt64 {
		k.arm(now, at)
		return
	}
	k.disarm()
}

// A key whose server names buckets (see bucketModels) holds requests of
// many routes in one queue, and one of them may wait for its bucket while
// the others' buckets hold quota: the head of the queue must not hold them
// all (a bucket of two routes spent early in a window held every route for
// the rest of it, and the global window over them was never reached). So
// dispatch passes a waiter held by its route's bucket alone for longer
// than maxGap (see routeHeld), and every waiter of the same bucket after
// it, which keeps their order: the requests of one bucket leave in the
// order they came, and the first of them is looked at first again when
// its bucket refills. A shorter wait holds the queue as before: two
// estimates of one boundary (a bucket's reset, its global window's end)
// differ by the answers' jitter, and a route whose bucket refills a few
// milliseconds after the global window would find it spent each time.
// Whatever holds the whole key (its limits, pauses, its scope's window, a
// learned window or pace, an outage, the answer to a route's first
// request, which may be counted by any bucket) holds the queue at its
// head.

// maxHeldRoutes bounds the buckets dispatch passes in one call; past it,
// the queue waits at the next held one, as if by its head.
const maxHeldRoutes = 16

// routeHolds is the buckets whose first waiter dispatch passed (nil for
// the key's own model, which paces the routes not mapped to one), and the
// earliest instant one of them may leave.
type routeHolds struct {
	groups [maxHeldRoutes]*bucketModel
	n      int
	at     int64 // 0: none
}

func (h *routeHolds) has(g *bucketModel) bool {
	for _, x := range h.groups[:h.n] {
		if x == g {
			return true
		}
	}
	return false
}

// add notes that g's first waiter may leave at at; false if the bound is
// reached (the waiter holds the queue).
func (h *routeHolds) add(g *bucketModel, at int64) bool {
	if h.n == maxHeldRoutes {
		return false
	}
	h.groups[h.n] = g
	h.n++
	if h.at == 0 || at < h.at {
		h.at = at
	}
	return true
}

// wake returns the earlier of d and the instant a passed waiter may leave.
func (h *routeHolds) wake(d int64) int64 {
	if h.n > 0 {
		return min(d, h.at)
	}
	return d
}

// routeGroup returns the bucket that paces route on k, whose server names
// buckets; nil for the key's own model.
func (k *keyState) routeGroup(route string) *bucketModel {
	_, b := k.modelFor(route)
	return b
}

// routeHeld reports, under k.mu at now, whether w, which may not leave
// before d, is held by its route's bucket alone (see routeGroup), for
// longer than maxGap: nothing that holds the whole key holds it; at is
// when the key lets it go, as far as the rest says.
func (k *keyState) routeHeld(now, d int64, w *waiter) (at int64, ok bool) {
	if k.buckets == nil || d-now <= int64(maxGap) {
		return d, false
	}
	at = k.earliestFor(max(w.arrival, k.freedAt), 1, w.cost, w.route, false)
	return at, at <= now
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
	now := k.env.now()
	k.mu.Lock()
	k.timerAt = 0
	k.dispatch(now)
	k.mu.Unlock()
}

// idle reports, under k.mu, whether k holds nothing that a new keyState
// would not: no waiter, nothing in flight (with or without a bound on it),
// nothing owed to the pacer, no pause, nothing being learned, and no
// breaker but a closed one.
func (k *keyState) idle(now int64) bool {
	return k.queue.head == nil && k.inflight == 0 && k.unseenN() == 0 && k.timerAt == 0 && k.pacer.idle(now) &&
		k.model.idle(now) && k.aimd.idle(now) && k.window.idle(now) && k.scope.idle(now) && k.statedUntil <= now && !k.out.down && k.strikesIdle(now) &&
		(k.br == nil || BreakerState(k.br.lastState.Load()) == BreakerClosed)
}

// holdStated applies, under k.mu at now, a wait the server named that was
// longer than the cap: while what is left of it is still longer, a request
// fails at once with a *WaitError that names it; once it fits the cap, the
// key is paused until its end.
func (k *keyState) holdStated(now int64) error {
	left, limit := time.Duration(k.statedUntil-now), k.env.cfg.maxRetryAfter
	if left > limit {
		return &WaitError{Wait: left, Allowed: limit, Stated: true}
	}
	k.pacer.pause(k.statedUntil)
	return nil
}

// deadline returns, on the pacer's clock, when a request with ctx that
// joins the queue at now must have left: its context's deadline, the end
// of MaxWait or until (0: none; see acquire), whichever comes first; 0 for
// none of them.
func (k *keyState) deadline(ctx context.Context, now, until int64) int64 {
	d := until
	if mw := k.env.cfg.queue.MaxWait; mw > 0 {
		if c := satAdd(now, int64(mw)); d == 0 || c < d {
			d = c
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		if c := max(int64(dl.Sub(k.env.epoch)), 1); d == 0 || c < d {
			d = c
		}
	}
	return d
}

// probeWait bounds how long a key with no limit waits for the answer to
// its first request before it sends more.
const probeWait = time.Second

// unsentFirst notes that departure seq was not sent: if it was the first,
// the key does not wait for its answer, and its next departure is the
// first.
func (k *keyState) unsentFirst(seq uint64) {
	if !k.probing.Load() {
		return
	}
	k.mu.Lock()
	if k.firstSeq == max(uint32(seq), 1) {
		k.firstSeq = 0
		k.dispatch(k.env.now())
	}
	k.mu.Unlock()
}

// endProbe lets a key that waited for its first answer go on. The test is
// inlined; the work is not.
func (k *keyState) endProbe() {
	if k.probing.Load() {
		k.endProbeNow()
	}
}

func (k *keyState) endProbeNow() {
	k.mu.Lock()
	k.probing.Store(false)
	k.dispatch(k.env.now())
	k.mu.Unlock()
}

// answered notes an answer to dep that said nothing of the quota: while a
// window is being learned, it counts in what its cycle let through; the
// first answer of a route, or one its scope counts, is noted too.
func (k *keyState) answered(dep *departure) {
	if k.learning.Load() || k.sampling.Load() || dep.probeRoute != "" || dep.scopeSeq != 0 {
		k.answeredNow(dep)
	}
}

func (k *keyState) answeredNow(dep *departure) {
	k.mu.Lock()
	now := k.env.now()
	k.window.answered(dep.seq)
	k.aimd.heardFrom(now, dep.seq, now-dep.sent)
	k.sustain()
	k.scope.answered(dep.scopeSeq, now-dep.sent, now)
	k.align(now)
	k.routeDone(now, *dep, true)
	if k.sample.at != 0 || k.aimd.probing() {
		k.dispatch(now) // the held sample (see windowSample), or the cycle's probe (aimd.holds), may go now
	}
	k.mu.Unlock()
}

// unanswered notes that dep got no answer (it failed, or was not sent).
func (k *keyState) unanswered(dep *departure) {
	if dep.probeRoute != "" || dep.scopeSeq != 0 {
		k.mu.Lock()
		now := k.env.now()
		k.scope.answered(dep.scopeSeq, 0, now) // none will come
		k.routeDone(now, *dep, false)
		k.mu.Unlock()
	}
}

// observe applies what the response to dep, sent on route, said, at now.
// coarse reports that the response stated its reset to the second, and
// rc the estimates of the server's clock it was read with.
func (k *keyState) observe(now int64, dep departure, route string, sig *ratelimitheader.Signal, coarse bool, rc readClock) {
	seq := dep.seq
	k.mu.Lock()
	defer k.mu.Unlock()
	k.probing.Store(false)
	pausedTill := max(k.pacer.pauseUntil, k.scope.pauseUntil.Load()) // before this response
	// A wait the server names holds the key for the cap at most: a longer
	// one is remembered, and fails at once the requests it would hold
	// longer (see holdStated).
	limit := k.env.cfg.maxRetryAfter
	wait := min(sig.Wait, limit)
	if sig.Throttled && sig.HasWait {
		until := satAdd(now, int64(wait))
		if sig.Scope == ratelimitheader.ScopeGlobal {
			k.scope.pause(until)
			k.env.scopePaused(until)
		} else {
			k.pacer.pause(until)
		}
	}
	if k.buckets != nil {
		k.buckets.routeAnswered(route)
	}
	global := sig.Throttled && sig.Scope == ratelimitheader.ScopeGlobal
	switch {
	case global && sig.HasWait && !sig.Permanent && sig.Wait%time.Second != 0:
		// The end of the global window, to the millisecond.
		k.env.scopesActive.Store(true) // before the scope: see scoped
		k.scope.throttled(satAdd(dep.sent, int64(sig.Wait)), satAdd(now, int64(sig.Wait)), dep.scopeSeq)
	default:
		k.scope.answered(dep.scopeSeq, now-dep.sent, now)
	}
	if sig.Bucket != "" {
		k.env.scopesActive.Store(true) // before the scope: see scoped
		k.scope.activate()             // per-route buckets: there may be a global limit over them
	}
	k.millisecondResets(&k.model)
	switch {
	case sig.Bucket != "" && sig.HasRemaining:
		k.observeBucket(now, dep, route, sig, coarse)
	case dep.sub != nil && dep.sub.m.known:
		if sig.Throttled {
			// Rejected by another limit than its bucket's (a global one),
			// or by the bucket's own with a bare 429: the bucket did not
			// count it. If it left with room the bucket's model trickled
			// in before a stated reset, the bucket resets windows.
			dep.sub.m.judgeTrickle(dep.subSeq, !global)
			dep.sub.m.correct(now, dep.at, 1)
		}
		dep.sub.m.answeredDep(dep.subSeq)
	default:
		k.model.secondReset, k.model.offset = coarse, int64(rc.reset)
		k.model.observe(now, seq, k.sent, sig)
		k.model.resetAt = min(k.model.resetAt, satAdd(now, int64(limit)))
	}
	if sig.HasWait && sig.Wait > limit && (sig.Throttled || k.model.rate == 0) {
		k.statedUntil = max(k.statedUntil, satAdd(now, int64(sig.Wait)))
		err := &WaitError{Wait: sig.Wait, Allowed: limit, Stated: true}
		for w := k.queue.head; w != nil; w = k.queue.head {
			k.queue.remove(w)
			w.err = err
			w.ready <- struct{}{}
		}
	}
	if sig.Throttled && sig.HasWait && !sig.HasRemaining && !sig.Permanent && sig.Wait%time.Second != 0 && !global {
		// A wait in whole seconds ends up to a second after the boundary it
		// rounds: only a finer one (a date on a skewed clock, Discord's
		// retry_after) can say where windows end, and a date only once the
		// server's clock is known well.
		if rc.waitAt {
			k.window.reclock(int64(rc.wait))
		}
		k.window.unheard(k.sent, max(k.unseenN(), 1))
		k.window.throttled(satAdd(now, int64(sig.Wait)), seq, k.sent)
	}
	k.window.answered(seq)
	k.aimd.heardFrom(now, seq, now-dep.sent)
	k.sustain()
	bare := k.bare(sig)
	b := bareThrottle{now: now, seq: seq, at: dep.sent, atKnown: true, pausedTill: pausedTill, wait: wait, hasWait: sig.HasWait, sent: k.sent}
	capped := bare && k.learnsCap() && k.concThrottle(now, dep, b)
	if sig.Throttled {
		k.thrN++ // after concThrottle, which counts this one out
	}
	if capped {
		// The cap's throttle: no measure of the pace, no strike.
	} else if bare && k.strikes != nil && seq > k.strikes.after && (len(k.pacer.buckets) > 0 || k.strikes.n >= 2) {
		// A try throttled again: a block goes on, and the strikes' pauses
		// answer it; the pace that was configured is not to blame, nor,
		// once a try has been refused alone after a pause, the pace that
		// was learned: that try was sent at no pace. (Cut by each, a key
		// left a block of 30 s at 0.43 of the pace the block began at,
		// climbed back past it within 40 s, and met the next block: one
		// every 90 s against a bucket of 10/s.)
	} else if bare && k.rareThrottle(now, seq) {
		if sig.HasWait {
			k.resumeWithoutBurst(satAdd(now, int64(wait)))
		}
	} else if bare && !k.fleetPaced {
		// (A fleet-paced key's is the fleet's: see Transport.learnShared.)
		k.cut(b)
	}
	if sig.Throttled && !capped {
		k.strike(now, seq, sig, wait)
	}
	k.noteLearning() // after the cut, which may begin a cycle
	k.align(now)
	k.dispatch(now)
}

// sustain keeps, under k.mu, the pace of bare throttles at or above what
// the cycles of a window being learned let through: a pace under it never
// spends a window's quota, so the window never throttles again, and is
// never learned.
func (k *keyState) sustain() {
	if r := k.window.sustained(); r > 0 && k.aimd.active && !k.window.on {
		k.aimd.wmax = max(k.aimd.wmax, r/aimdBeta) // at() is then r at least
	}
}

// cut takes the bare throttle b in, under k.mu: the key's own AIMD cuts
// its pace.
func (k *keyState) cut(b bareThrottle) {
	now, seq, pausedTill := b.now, b.seq, b.pausedTill
	if !k.aimd.active {
		k.aimd.ceiling = k.ceiling()
		k.model.track() // the cuts to come measure what was sent
		if k.accidents != nil {
			// Throttles came before, taken as accidents: this one is no
			// first burst, but of a key at its configured pace, whose
			// burst went out after each pause.
			k.aimd.active, k.aimd.wmax, k.aimd.cycles().burst = true, k.aimd.ceiling, float64(k.minBurst())
			k.aimd.cutAt = now - int64(time.Hour)
		}
	}
	n, span, known := k.model.recent(now, pausedTill)
	if !known && pausedTill > now-int64(time.Second) && (k.window.curEnd == 0 || k.window.off) {
		// Throttled soon after a pause, by a server whose waits name no
		// window's end: a bucket, full again when the pause ended, and
		// empty when seq came. What left from the pause's end up to seq
		// (the rest were still on their way), over that span, measures
		// its rate (see aimd.throttled).
		n, span, known = k.model.sentSince(pausedTill, seq)
		n++ // seq too: it found less than one left, so the rate is under (n+1-burst)/span
	}
	try := false
	if k.strikes != nil && seq > k.strikes.after {
		// A try, alone after a pause, throttled again: what was sent
		// says nothing of the rate (a block goes on); the cut is from
		// the pace the key had.
		known = false
		// Sent after a pause (the wait the server named, or the
		// strikes'), it measures no cycle either, from the wait's end
		// or a block's (see cycleRate): the key sent nothing else
		// meanwhile, and the cycle let nothing through. (After a ban of
		// 5 minutes answered with 403s that named a minute, a key that
		// took its first try's 403 for the cycle since the block its
		// first burst began went on at 0.5/s where it had paced 9/s:
		// 17m38s for 300 requests, not 7m35s.)
		try = k.strikes.paused
		b.atKnown = b.atKnown && !try
	}
	afterPause := known && pausedTill > now-int64(time.Second)
	if b.hasWait {
		if w, ok := k.aimd.windowAfterAll(seq, int64(b.wait)); ok && w > int64(b.wait) {
			b.wait = time.Duration(min(w, int64(k.env.cfg.maxRetryAfter)))
			k.pacer.pause(satAdd(now, int64(b.wait)))
		}
	}
	if r, ok := k.aimd.cycleRate(seq, k.model.sentSince); ok && k.aimd.active && !try {
		// The first throttle since a block ended: the cycle from its end
		// measures the rate, over its whole span (the last second alone
		// measured the pace it was thrown at, up to twice the rate in
		// slow start, and the cut from it met the next block).
		n, span, known, afterPause = r, 1, true, false
	}
	// A throttle that left under a learned cap, at no pace, cuts no pace
	// that has measured the server's (see concMeasured); slow start's,
	// which measured nothing yet, is cut as by any.
	first := !k.aimd.active
	if !b.unpaced || !k.aimd.active || k.aimd.slow {
		k.aimd.throttledAt(now, seq, b.at, b.atKnown && b.hasWait, k.firstAt, k.window.lastAt, k.sent, n, span, known, afterPause, k.model.ring())
	}
	k.sustain()
	k.aimdB.Interval, k.aimdB.Burst, k.aimdB.Unweighted = k.aimd.interval(now), 1, true
	// The throttle emptied the server's bucket: the next request waits
	// for the end of the pause the server named, or else one interval
	// at the new pace.
	if b.hasWait {
		// Nothing is sent during a pause longer than the climb back takes
		// (a penalty box's): the climb starts at its end, or the pause
		// would end at a rate doubled many times over, in a burst that
		// meets the next one. A shorter one (a window's) is part of the
		// cycle the climb measures.
		if b.wait > aimdK {
			k.aimd.climbFrom(satAdd(now, int64(b.wait)))
		}
		if first && k.aimd.active && b.wait >= blockLeast && b.wait%time.Second == 0 && k.firstSeq != 0 && int64(b.wait) > blockSpan*max(k.window.lastAt-k.firstAt, 0) {
			// A wait far longer than the first burst took: a window's or a
			// block's (see aimd.namedBlock).
			k.aimd.namedBlock(now, satAdd(now, int64(b.wait)), k.sent)
		}
		k.aimdB.TAT = satAdd(now, int64(b.wait))
		if c := k.aimd.cycles(); c.resumeAt == 0 || seq > c.resumeN {
			// A throttle held for its measure (see concMeasured) is
			// taken in later: the cycle counts from what had left when
			// it came, since what left under the cap after its wait went
			// through on the server's count too.
			sent := k.sent
			if b.sent != 0 {
				sent = b.sent
			}
			k.aimd.waited(k.aimdB.TAT, int64(b.wait), sent)
		} else {
			c.resumeAt = max(c.resumeAt, k.aimdB.TAT) // of the same flight
		}
	} else {
		k.aimdB.TAT = max(k.aimdB.TAT, satAdd(now, k.aimdB.Interval))
	}
}

// bare reports, under k.mu, whether sig is a bare throttle for k: one
// that states no quota, on a key whose server has stated none either.
func (k *keyState) bare(sig *ratelimitheader.Signal) bool {
	return sig.Throttled && !sig.HasRemaining && !k.model.known && !sig.Permanent && k.buckets == nil
}

// fleetThrottle classifies the throttle sig of dep for the fleet, under
// k.mu: bare, it states no quota on a key whose server has stated none
// either (see bare); overran, the model that paced dep knows the server's
// quota from what its answers state is left, but no policy states the
// rate it refills at, so the other processes' requests were seen only as
// quota gone. A key whose answers name several buckets (Discord's routes)
// is not cut for one of them; one bucket (GitHub's resource) is the key's
// quota.
func (k *keyState) fleetThrottle(sig *ratelimitheader.Signal, dep *departure) (bare, overran bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.bare(sig) {
		return true, false
	}
	if sig.Permanent || (sig.Limit > 0 && sig.Period > 0) {
		return false, false
	}
	m := &k.model
	if dep.sub != nil {
		if len(k.buckets.byID) > 1 {
			return false, false
		}
		m = &dep.sub.m
	}
	return false, m.known && !m.rateStated
}

// settleBare takes in the bare throttle b after the fleet was told of it:
// shared, the fleet's pace holds, and the key's own (cut while the fleet
// could not be told) is forgotten; not shared, the key cuts its own.
func (k *keyState) settleBare(b bareThrottle, shared bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if shared {
		k.aimd, k.aimdB = aimd{}, bucket{}
		k.noteLearning()
		return
	}
	b.pausedTill = max(k.pacer.pauseUntil, k.scope.pauseUntil.Load())
	k.cut(b)
	k.noteLearning()
	k.dispatch(k.env.now())
}

// noteLearning notes, under k.mu, whether answers that say nothing of the
// quota count (see answered): while a window is learned from throttles,
// or a cycle holds its departures for their answers (aimd.holds).
func (k *keyState) noteLearning() {
	k.learning.Store(k.window.learning() || k.aimd.probing())
}

// rareThrottles is how many throttles a key with configured limits takes
// within rareSpan as accidents (a burst bunched up by the network) before
// it lowers its pace below the limits.
const (
	rareThrottles = 2
	rareSpan      = 10 * time.Second
)

// rareThrottle reports, under k.mu, whether a bare throttle of departure
// seq at now is one that a key with configured limits trusts them through:
// it pauses for the wait the server states, then goes back to its
// configured pace, as long as no more than rareThrottles throttles came
// within rareSpan. Throttles of requests sent before the previous one came
// are the same accident. A key without limits, or one already adapting,
// has no pace to trust.
func (k *keyState) rareThrottle(now int64, seq uint64) bool {
	if len(k.pacer.buckets) == 0 || k.aimd.active {
		return false
	}
	a := k.accidents
	if a == nil {
		a = new(accidents)
		k.accidents = a
	} else if seq <= a.seq {
		return true
	}
	k.model.track() // if the throttles keep coming, what was sent tells the pace
	rare := a.at[0] == 0 || now-a.at[0] > int64(rareSpan)
	copy(a.at[:], a.at[1:])
	a.at[rareThrottles-1] = now
	a.seq = k.sent
	return rare
}

// accidents are the bare throttles of a key with configured limits (see
// rareThrottle): the departures sent when the last one came, and when the
// last rareThrottles came.
type accidents struct {
	seq uint64
	at  [rareThrottles]int64
}

// resumeWithoutBurst makes k, under k.mu, leave again at its configured
// pace from at, without its burst, which builds up again as the key idles.
// The server's bucket is full again after the pause it named, but a burst
// sent at once may reach it after the next request and be throttled again:
// with a burst as large as the server's, that is how most rare throttles
// come, and each would cost another pause. The burst forgone costs at most
// its own time at the key's pace.
func (k *keyState) resumeWithoutBurst(at int64) {
	for i := range k.pacer.buckets {
		b := &k.pacer.buckets[i]
		b.TAT = max(b.TAT, satAdd(at, satMul(b.Burst-1, b.Interval)))
	}
}

// minBurst returns the smallest burst of k's limits; 0 when it has none.
func (k *keyState) minBurst() int64 {
	var m int64
	for i, b := range k.pacer.buckets {
		if i == 0 || b.Burst < m {
			m = b.Burst
		}
	}
	return m
}

// ceiling returns the fastest rate, per second, that k's limits allow in
// the long run; 0 when it has none.
func (k *keyState) ceiling() float64 {
	c := 0.0
	for _, b := range k.pacer.buckets {
		if r := 1e9 / float64(b.Interval); c == 0 || r < c {
			c = r
		}
	}
	return c
}

// failWaiters fails every request waiting on k with err, at once: an open
// breaker does not keep them waiting behind it.
func (k *keyState) failWaiters(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for w := k.queue.head; w != nil; w = k.queue.head {
		k.queue.remove(w)
		w.err = err
		w.ready <- struct{}{}
	}
	k.disarm()
}

// watchBreaker wraps the outcome callback of a request on k so that the
// failure that opens k's breaker also fails the requests queued behind it.
func (k *keyState) watchBreaker(done func(outcome)) func(outcome) {
	return func(o outcome) {
		done(o)
		if o == outcomeFailure && k.br.state() == BreakerOpen {
			k.failWaiters(k.br.openError(gobreaker.ErrOpenState, time.Now()))
		}
	}
}

// countRequest counts a first attempt, sent at at on the pacer's clock, in
// k's retry budget.
func (k *keyState) countRequest(at int64) {
	w := k.env.budgetWidth
	if w == 0 {
		return // budgets are off
	}
	// Still in the bucket counted in: at in [idx·w, idx·w+w), checked
	// without a division.
	if lo := k.budgetIdx.Load() * w; at < lo || at-lo >= w {
		k.flushBudget(at / w)
	}
	k.budgetCur.Add(1)
}

// flushBudget hands the requests counted so far to k's budget, and counts
// from now on in the bucket of time index idx.
func (k *keyState) flushBudget(idx int64) {
	if k.env.budgetWidth == 0 {
		return
	}
	old := k.budgetIdx.Swap(idx)
	if n := k.budgetCur.Swap(0); n != 0 {
		k.retryBudget().addAt(old, n)
	}
}

// budgetWidth returns the width of k's budget buckets, in nanoseconds; 0
// without a budget.
func (k *keyState) budgetWidth() int64 { return k.env.budgetWidth }

// retryBudget returns k's retry budget, or nil when budgets are off. It is
// made on first use, when a bucket's requests are handed to it or a retry
// asks: until then it would hold nothing (its epoch is the Transport's),
// and a key that lives less than a bucket and retries nothing, as keys
// made and dropped by the thousand do, never needs one.
func (k *keyState) retryBudget() *retryBudget {
	b := k.budget.Load()
	if b == nil && k.env.budgetWidth != 0 {
		b = newRetryBudget(k.env.cfg.retry.Budget, k.env.epoch)
		if !k.budget.CompareAndSwap(nil, b) {
			b = k.budget.Load()
		}
	}
	return b
}
