package headway

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/headway-go/headway/ratelimitheader"
)

// An outage is a key whose host looks down: a request failed with a 5xx
// (not a throttle that states its wait), a 529, a broken or refused
// connection or a timeout. From that failure on, the key sends one request
// at a time, a probe, each after a backoff that grows from the failure
// (cenkalti/backoff), and its other requests wait in its queue, in order.
// The first probe that gets any other answer ends the outage (an outage
// that callers giving up on a host that hangs began needs hangProbes in a
// row), and the queue drains at once at the key's pace.
//
// The backoff is not jittered. Jitter spreads the retries of many clients
// that failed together; a key sends one probe at a time, and a fleet that
// shares its quota one probe in all (see SharedProber), so there is nothing
// to spread. What jitter would do is lengthen the longest wait: the time
// from the host's return to the probe that finds it is at most the
// interval in effect, which ±25% would make 1.25 times it, for the same
// number of probes.
//
// Outcomes are told apart by departure number, as gobreaker tells them
// apart by generation: a success of a request sent before the failure that
// began the outage does not end it (one sent after it does: the host
// answers, only a route of it failed), a failure of a request sent before
// the outage ended does not start another, and only the probe's own
// failure pushes the next probe out.
//
// Its fields are guarded by the key's mutex; times are on the pacer's clock.
type outage struct {
	// First, what every request reads or writes while the host is up (see
	// keyState): its first 40 bytes.
	down    bool
	probing bool // a probe is in flight
	fleet   bool // down as the fleet reports it (see SharedProber)
	// replaying: the probe out is net/http's replay of a request that met
	// a broken keep-alive connection, while the host was up (see
	// replayTurn); next is then when it stops holding the queue.
	replaying bool
	isDown    atomic.Bool // down, read without the lock
	stalled   atomic.Bool // the queue waits for an answer: a stall (see outageGate) or a replay (see replayTurn), or every answer is watched (see watching)
	// stallShared: the fleet heard of a stall of this key, and awaits its
	// end (see onStall).
	stallShared atomic.Bool
	// What tells a stall (see outageGate), with the silence in
	// keyState.pending (see stalls).
	latency atomic.Int64 // the usual latency of an answer; 0: none yet
	stall   *fleetStall  // with a fleet only

	probe  uint64 // the probe's departure number, while probing
	next   int64  // when the next probe may leave (while down; see replaying)
	downAt uint64 // the departure whose failure began the outage
	upAt   uint64 // the last departure before the last outage ended
	// While fleet: when the fleet's next probe is due.
	fleetNext int64
	rare      *outageRare   // made on first use: few keys ever need it
	changes   atomic.Uint64 // times down changed
	logged    atomic.Uint64 // changes logged (see observer.outage)
}

// fleetStall is what a key whose outages its fleet shares needs to tell the
// fleet of a stall (see onStall): the timer that looks for one once a
// silence began, and the mark of the last one told (see stalls; under the
// key's mutex). told, a lock (a channel, which virtual time can wait on), orders
// the fleet's word of a stall and of its end: the answer that ends a stall
// tells the fleet after the report of the stall returned, not beside it,
// where the end could reach the fleet first and leave it holding until its
// next probe.
type fleetStall struct {
	key   string
	timer *time.Timer
	first uint64
	told  chan struct{}
	// tell: what the key is to tell its fleet of its overloads (see
	// SharedVerdict), set under the key's mutex: tellLimit, or
	// tellNoLimit; 0: nothing.
	tell atomic.Int32
}

// outageRare is what few keys' outage states ever need, made on first use:
// the probes' backoff (see backoff), and the span of their callers that
// gave up on a host that answers others (see hangSpan).
type outageRare struct {
	bo   *backoff.ExponentialBackOff
	hang hangSpan
	// ramp, after an outage: how many requests may be out at once, one
	// more for each answer (see rampUp); 0: no bound. fine and failed
	// count the answers during the outage that were no failure, and those
	// that were (the first included).
	ramp, fine, failed uint32
	over               overloads
}

// rareState returns o's outageRare, made on first use.
func (o *outage) rareState() *outageRare {
	if o.rare == nil {
		o.rare = new(outageRare)
	}
	return o.rare
}

// setDown sets o.down, and its copy read without the lock. Called under
// the key's mutex.
func (o *outage) setDown(down bool) {
	if o.down != down {
		o.changes.Add(1)
	}
	o.down = down
	o.isDown.Store(down)
	if !down {
		o.fleet = false
		if o.rare != nil {
			o.rare.hang.owed = 0 // however it ended
		}
	}
}

// probeClock is the clock of every key's probe backoff: never read (a
// probe backoff has no elapsed-time bound) and never set, shared.
var probeClock clockAt

// backoff returns o's probe backoff, made on first use with p's settings.
func (o *outage) backoff(p probeSchedule) *backoff.ExponentialBackOff {
	r := o.rareState()
	if r.bo == nil {
		r.bo = backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(p.initial),
			backoff.WithMaxInterval(p.cap),
			backoff.WithMultiplier(probeMultiplier),
			backoff.WithRandomizationFactor(0), // see outage
			backoff.WithMaxElapsedTime(0),
			backoff.WithClockProvider(&probeClock),
		)
		r.bo.Reset()
	}
	return r.bo
}

// outage logs, at Info, that the host of key went down or came back, once
// for each change of k's outage state: the first request to see the change
// logs it, after k's locks are released.
func (ob *observer) outage(ctx context.Context, req *http.Request, key string, k *keyState) {
	if ob.log == nil {
		return
	}
	o := &k.out
	n, seen := o.changes.Load(), o.logged.Load()
	if n == seen || !o.logged.CompareAndSwap(seen, n) || !ob.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := []slog.Attr{slog.String("key", keyID(key))}
	if req.URL != nil {
		attrs = append(attrs, slog.String("host", req.URL.Host))
	}
	k.mu.Lock()
	down, next := o.down, o.next
	k.mu.Unlock()
	if !down {
		ob.log.LogAttrs(ctx, slog.LevelInfo, "headway: host back", attrs...)
		return
	}
	attrs = append(attrs, slog.Time("next_probe", k.env.wall(next)))
	ob.log.LogAttrs(ctx, slog.LevelInfo, "headway: host down, probing", attrs...)
}

// outageVerdict is what one answer tells a key about its host.
type outageVerdict uint8

const (
	hostUnknown outageVerdict = iota // the caller gave up
	hostUp                           // any answer that is not a failure below
	hostDown                         // 5xx, 529, broken connection, timeout
	hostUnsent                       // nothing was sent: as hostUnknown, but no answer either
)

// statusOverloaded is the status of an overloaded server that some APIs
// send (Anthropic's overloaded_error, Notion's service_overload). It is not
// registered; net/http has no name for it.
const statusOverloaded = 529

// hostFailing reports whether a response's status says that its host is
// failing: a 5xx (500, 502, 503, 504, 529 and the others), but not 501
// Not Implemented or 505 HTTP Version Not Supported, with which a server
// that works refuses the request, not the load, as it does with a 4xx.
// go-retryablehttp's DefaultRetryPolicy leaves 501 out of its 5xx alike.
// The outage state and the breaker both read a status by it.
func hostFailing(status int) bool {
	return status >= 500 && status != http.StatusNotImplemented && status != http.StatusHTTPVersionNotSupported
}

// hostVerdict classifies the answer to one attempt: resp or err, with sig
// its reading, ctxErr the request context's error when it ended.
//
// A 5xx is a failure of the host (see hostFailing), except a throttle
// that states its wait (a 503 or 529 with Retry-After): that one pauses
// the key instead. A transport error is a failure when it may pass with
// time (see retryableError).
func hostVerdict(resp *http.Response, err error, ctxErr error, sig *ratelimitheader.Signal) outageVerdict {
	if ctxErr == nil && err == nil && resp.StatusCode < 500 {
		return hostUp // the common case, inlined
	}
	return hostVerdictOf(resp, err, ctxErr, sig)
}

func hostVerdictOf(resp *http.Response, err error, ctxErr error, sig *ratelimitheader.Signal) outageVerdict {
	if ctxErr != nil {
		return hostUnknown
	}
	if err != nil {
		if retryableError(err) {
			return hostDown
		}
		return hostUnknown
	}
	switch {
	case !hostFailing(resp.StatusCode):
		return hostUp
	case sig.Throttled && sig.HasWait:
		return hostUp
	}
	return hostDown
}

// overloaded reports whether a response with status, read as sig, is an
// overload that names no delay: a 503 or 529 without Retry-After (or a
// dialect's wait).
func overloaded(status int, sig *ratelimitheader.Signal) bool {
	return (status == http.StatusServiceUnavailable || status == statusOverloaded) && !sig.HasWait
}

// probeSchedule is a key's probe backoff settings, from RetryOptions.
type probeSchedule struct {
	initial, cap time.Duration // initial <= 0: no outage state
}

// Defaults of RetryOptions.ProbeInterval and MaxProbeInterval, and the
// growth of the probes' backoff.
const (
	defaultProbeInterval    = 200 * time.Millisecond
	defaultMaxProbeInterval = 500 * time.Millisecond
	probeMultiplier         = 2
)

// newProbeSchedule fills in the defaults of o's probe settings.
func newProbeSchedule(o RetryOptions) probeSchedule {
	p := probeSchedule{initial: o.ProbeInterval, cap: o.MaxProbeInterval}
	switch {
	case p.initial < 0:
		return probeSchedule{}
	case p.initial == 0:
		p.initial = defaultProbeInterval
	}
	if p.cap <= 0 {
		p.cap = defaultMaxProbeInterval
	}
	p.cap = max(p.cap, p.initial)
	return p
}

// outageGate reports, under k.mu, whether k may send a request at now as
// far as its host's health goes: not while a probe is in flight, nor while
// the key stalls: its requests have gone unanswered for much longer than
// its answers usually take (a host that accepts and hangs, or answers
// slower than the client waits). The requests already out then probe the
// host: the next answer, or the first failure, lets the queue go on.
func (k *keyState) outageGate(now int64) bool {
	o := &k.out
	if r := o.rare; r != nil && r.ramp > 0 && !o.down && k.unseenN() >= uint64(r.ramp) {
		return false // the next answer widens the ramp (see rampUp)
	}
	if o.probing {
		if !o.replaying || o.down {
			return false
		}
		if now < o.next {
			k.arm(now, o.next)
			return false
		}
		// A replay that takes this long is a long call, not a host down:
		// the queue goes on.
	}
	mark, end, ok := k.stalls(now)
	if !ok {
		return true
	}
	o.stalled.Store(true)
	if k.silence() != mark {
		// Answered meanwhile: its settle may not have seen stalled.
		if !o.replaying && !o.watching() {
			o.stalled.Store(false)
		}
		return true
	}
	k.arm(now, end)
	return false
}

// stalls reports whether k's requests stall at now (see outageGate), and if
// so, the mark of the silence the stall is counted in and when it ends at
// the latest. It takes no lock.
//
// A silence begins with the first departure sent since the last answer
// (see sending) and ends with the next answer (see seen). It is kept in
// keyState.pending, beside the count of departures whose outcome the key
// has not yet taken in, so that the departure that begins a silence and the
// answer that ends it each change the key once, not twice: the count in
// the low unseenBits bits, and above them the silence's mark: when it
// began, in units of 1<<silenceShift ns of the pacer's clock, plus one,
// modulo 1<<silenceBits (see silenceAt); 0 for none.
//
// An answer lets a stall that holds the queue go at once (see settle). A
// stall that begins while an answer is read, after its settle and before
// its seen, holds the queue until its end: rare (the answer came as the
// silence turned into a stall), and short.
func (k *keyState) stalls(now int64) (mark uint64, end int64, ok bool) {
	lat := k.out.latency.Load()
	mark = k.silence()
	if lat == 0 || mark == 0 {
		return 0, 0, false // nothing known, or nothing unanswered
	}
	began := silenceStart(mark, now)
	quiet, thr := now-began, stallAfter(lat)
	end = began + thr + int64(probeWait) + 1 // a stall is short-lived
	return mark, end, quiet > thr && quiet <= thr+int64(probeWait)
}

// hung reports whether departure dep, whose caller gave up at now before
// any answer came, gave up on a host that hangs. Its caller's deadline then
// served as a timeout of the host, as net/http's ResponseHeaderTimeout
// would: the host is failing. probe says that dep is the probe of a host
// that is down.
//
// Only a caller that gave up long after dep left tells anything: later
// than a stall takes to show (see stalls), twice the usual latency of the
// key's answers and 10 ms. Such a give-up is one of a host that hangs when
//
//   - dep is the probe of a host that is down: a probe must be answered
//     before its caller gives up;
//   - the host has sent nothing (no answer to any request of k) since dep
//     left, and it is the second such request of the silence, or the host
//     is down already (dep was out when it went down);
//   - or at least half of the key's recent departures, hangMin of them at
//     least, ended so (see hungOften): a host that answers some requests
//     and hangs the rest, whose answers end every silence.
//
// A caller that gives up sooner tells nothing of the host: nor does a
// request of a key whose answers were never timed, nor one request alone
// (a long call its caller ended), nor a few among many answered.
func (k *keyState) hung(dep *departure, probe bool, now int64) bool {
	if k.env.probe.initial <= 0 {
		return false
	}
	o := &k.out
	lat := o.latency.Load()
	if lat == 0 || now-dep.sent <= stallAfter(lat) {
		return false
	}
	often := k.hungOften(dep.seq)
	mark := k.silence()
	silent := mark != 0 && silenceStart(mark, now) <= dep.sent &&
		(o.isDown.Load() || k.host.hungIn.Swap(mark) == mark)
	return probe || silent || often
}

// hangMin is the least number of a key's departures whose callers gave up
// long after they left (see hung) that shows a host that hangs some
// requests (see hungOften): fewer are a few long calls, whatever their
// share.
const hangMin = 8

// hangSpan is the span of a key's departures over which the callers that
// gave up long after their request left (see hung) are counted: from the
// earliest such departure to the last one sent when the span began, or
// when it was drawn out.
type hangSpan struct {
	from, to uint64 // the departures of the span; to 0: none yet
	floor    uint64 // the last departure of the span before, which ended
	n        uint64 // the departures of the span whose callers gave up long after
	// owed: the probes that must yet be answered in a row to end the
	// outage that a hang began (see hangProbes); 0 for another outage.
	owed uint8
}

// hangProbes is how many probes in a row must be answered before the
// callers give up on them to end an outage that began as callers gave up
// on a host that hangs (see hung): a host that answers some requests and
// hangs the rest answers a probe as it answers any request, and a flight
// of every request that waited would meet the hang again. A host that
// answers one in two passes three probes one time in eight, one in ten
// one time in a thousand; a host that is back costs two round trips more.
const hangProbes = 3

// hungOften counts departure seq of k, whose caller gave up long after it
// left (see hung), and reports whether at least half of the departures of
// its span ended so, and at least hangMin: the host hangs as often as it
// answers, or more. It takes k.mu; a caller that gave up is no request of
// the fast path.
//
// A span begins with a give-up of a departure sent after the span before
// it (its floor): it spans the departures from that one to the last sent
// then, which were out when that one's caller gave up, for as long, or
// were answered meanwhile. A give-up of a departure sent before the span
// draws it back to that one; one sent after it draws it out to the last
// departure sent now, if at least half of the span ended so (the host
// goes on hanging), and begins a new span if not. A span that ends that
// way after the host is well again is drawn out over every departure
// answered meanwhile, and fails no request.
func (k *keyState) hungOften(seq uint64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	h := &k.out.rareState().hang
	switch {
	case seq <= h.floor:
		return false // counted in a span that ended
	case h.to == 0 || seq > h.to && 2*h.n < h.to-h.from+1:
		h.floor, h.from, h.to, h.n = h.to, seq, k.sent, 0
	case seq > h.to:
		h.to = k.sent
	case seq < h.from:
		h.from = seq
	}
	h.n++
	return h.n >= hangMin && 2*h.n >= h.to-h.from+1
}

// The layout of keyState.pending (see stalls).
const (
	unseenBits   = 24 // 16 million departures of one key out at once
	unseenMask   = 1<<unseenBits - 1
	silenceBits  = 64 - unseenBits
	silenceShift = 12                 // 4 µs: a stall is counted in milliseconds
	silenceMask  = 1<<silenceBits - 1 // 52 days of the pacer's clock
)

// silenceAt returns the mark of a silence that began at t: never 0, and
// never later than t when read back (see silenceStart), so that a stall is
// never seen late.
func silenceAt(t int64) uint64 {
	m := uint64(t>>silenceShift+1) & silenceMask
	if m == 0 {
		m = silenceMask // one unit early
	}
	return m
}

// silenceStart returns when the silence of mark m began, as read at now,
// on or after it: on it, or up to a unit earlier.
func silenceStart(m uint64, now int64) int64 {
	n := now>>silenceShift + 1
	return (n - int64((uint64(n)-m)&silenceMask) - 1) << silenceShift
}

// silence returns the mark of k's silence; 0 for none.
func (k *keyState) silence() uint64 { return k.pending.Load() >> unseenBits }

// silent reports whether a silence of k has begun.
func (k *keyState) silent() bool { return k.pending.Load() > unseenMask }

// depart counts n departures (0 or 1) that are sent at t, and begins a
// silence at t, unless one has begun: it reports whether it did.
func (k *keyState) depart(n uint64, t int64) bool {
	for {
		u := k.pending.Load()
		began := u <= unseenMask
		v := u + n
		if began {
			v |= silenceAt(t) << unseenBits
		}
		if v == u || k.pending.CompareAndSwap(u, v) {
			return began
		}
	}
}

// withdraw counts a departure that was not sent. It ends no silence, but
// one left with nothing out.
func (k *keyState) withdraw() {
	for {
		u := k.pending.Load()
		v := u - 1
		if v&unseenMask == 0 {
			v = 0
		}
		if k.pending.CompareAndSwap(u, v) {
			return
		}
	}
}

// endSilence ends k's silence, if one has begun.
func (k *keyState) endSilence() {
	for {
		u := k.pending.Load()
		if u <= unseenMask || k.pending.CompareAndSwap(u, u&unseenMask) {
			return
		}
	}
}

// A key stalls once a request has gone unanswered for stallFactor times
// the usual latency plus stallMargin, with no answer since it left. The
// stall lasts until an answer comes, or probeWait more at most: a long
// call must not hold the others up for long.
const (
	stallFactor = 2
	stallMargin = 10 * time.Millisecond
)

// stallAfter returns how long a silence of a key whose answers take lat
// lasts before it is a stall.
func stallAfter(lat int64) int64 { return satAdd(satMul(stallFactor, lat), int64(stallMargin)) }

// outageFloor returns d held back to the next probe, while k's host is
// down. Called under k.mu.
func (k *keyState) outageFloor(d int64) int64 {
	if k.out.down {
		return max(d, k.out.next)
	}
	return d
}

// outageTake notes, under k.mu, that departure seq left: while the host is
// down, it is the probe.
func (k *keyState) outageTake(seq uint64) {
	if k.out.down {
		k.out.probing, k.out.probe = true, seq
	}
}

// sending notes that departure dep of k goes to the server now: a stall is
// counted from the first send since the last answer, and the latency of
// its answer from dep.sent. When direct, dep left on acquire's fast path
// and nothing since could wait (a shared quota's slot, a body read, a
// hook), so the clock read that let it go stands for the send's; otherwise
// the clock is read again, and dep.sent moved to it: a wait for a shared
// slot is no part of the host's latency.
//
// The first send since the last answer, unless another one was, begins a
// silence: a stall is counted from it. With a fleet, it arms the key's
// stall timer: should the silence last into a stall, the fleet hears of it
// then (see onStall), whether or not a request of this process waits to
// leave.
//
// A departure that its take counted as sent at once (see takePlain)
// began the silence already, if it did: dep.began.
func (k *keyState) sending(dep *departure, direct bool) {
	if k.env.probe.initial <= 0 {
		return
	}
	began := dep.began
	if !began {
		if !direct {
			dep.sent = max(dep.sent, k.env.now())
		}
		// A silence begins, unless an earlier send is still unanswered.
		began = k.depart(0, dep.sent)
	}
	if o := &k.out; began && o.stall != nil {
		if lat := o.latency.Load(); lat != 0 {
			o.stall.timer.Reset(time.Duration(stallAfter(lat) + 1))
		}
	}
}

// settle tells k how departure dep ended, and lets the queue go on if it
// may. Every departure is settled once: hostUnsent for one that was not
// sent, hostUnknown for one whose caller gave up (hostDown if the host
// hangs: see hung). The silence a stall is counted in ends once the answer
// is taken in (see seen); if a stall holds the queue, an answer ends it at
// once, and the queue goes on. A caller that gave up before an answer came
// (dep.gaveUp) ends neither: no answer came.
//
// An answer's latency is timed where the stall rule may use it: when no
// latency is known yet, when another request of k is out or waiting (the
// rule holds requests back only then), and otherwise for one answer in
// latencySample, which keeps the average fresh for when that comes,
// without a clock read per request.
func (k *keyState) settle(dep *departure, v outageVerdict) {
	o := &k.out
	on := k.env.probe.initial > 0
	if on && v == hostUp {
		old := o.latency.Load()
		if old == 0 || k.unseenN() > 1 || k.queue.busy.Load() || dep.seq%latencySample == 0 {
			// The latency of the answers, an average of the last eight or
			// so timed: how long a silence must last to be a stall.
			lat := max(k.env.now()-dep.sent, 1)
			if old != 0 {
				lat = old + (lat-old)/8
			}
			o.latency.Store(lat)
		}
	}
	if !o.isDown.Load() && !o.stalled.Load() && (v != hostDown || !on) {
		return // the common case: the host is up, and nothing to undo
	}
	now := k.env.now()
	k.mu.Lock()
	if o.stalled.Load() && v != hostUnsent && !dep.gaveUp {
		k.endSilence() // an answer: seen would end it, too late for dispatch
	}
	o.stalled.Store(false)
	k.settleLocked(now, dep.seq, v, dep.gaveUp && v == hostDown)
	k.rampUp(v)
	if r := o.rare; r != nil {
		r.over.seen = false // settled
		switch {
		case v == hostUnsent && r.over.counting() && dep.seq > r.over.sent:
			r.over.unsent++
		case v == hostUnsent || dep.gaveUp:
		case r.over.trial:
			k.overloadAnswered(now, dep.seq)
		case v == hostUp && r.over.counting() && dep.seq > r.over.sent:
			r.over.ok++
		}
	}
	if o.replaying || o.watching() {
		o.stalled.Store(true) // the replay's answer is yet to come, or every answer is watched
	}
	k.failLate(now)
	k.dispatch(now)
	k.mu.Unlock()
}

// latencySample is how often an answer is timed while its key has nothing
// else out or waiting: one in latencySample. A clock read costs some 30 ns
// on a virtual machine, a quarter of a request's overhead; one in 32 costs
// 1 ns a request, and an average whose newest sample is 32 answers old
// when other requests come, which their own answers then refresh.
const latencySample = 32

// settleLocked is settle with k.mu held; the caller dispatches. hung says
// that departure seq failed as its caller gave up on a host that hangs
// (see hung).
func (k *keyState) settleLocked(now int64, seq uint64, v outageVerdict, hung bool) {
	o := &k.out
	if o.replaying && o.probe == seq {
		o.replaying = false
		if !o.down {
			// The replay of a host that was up: its failure begins an
			// outage below, as any.
			o.probing = false
		} // else the host went down meanwhile: the replay is its probe
	}
	switch {
	case !o.down && v == hostDown && seq > o.upAt && k.env.probe.initial > 0:
		// The requests sent after the one that failed are in flight: a
		// success among them shows the host up after all (a route of it
		// failed, not the host), their failures add nothing. But not
		// of a host that hangs: it answers some requests, as long as
		// it hangs the others (see hungOften), and seq left long ago.
		o.downAt = seq
		bo := o.backoff(k.env.probe)
		o.rare.hang.owed = 0
		if hung {
			o.downAt = k.sent
			o.rare.hang.owed = hangProbes
		}
		o.setDown(true)
		o.rare.fine, o.rare.failed = 0, 1
		o.rare.over.down, o.rare.over.downAt = o.rare.over.seen, now
		bo.Reset()
		o.next = satAdd(now, int64(bo.NextBackOff()))
	case !o.down:
	case o.probing && seq == o.probe:
		o.probing = false
		switch r := o.rare; {
		case v == hostUp && r != nil && r.hang.owed > 1:
			// A host that hung: one answer in time is not enough (see
			// hangProbes). The next probe may go at once.
			r.hang.owed--
			o.next = now
		case v == hostUp:
			o.upAt = k.sent
			o.setDown(false)
			k.outageEnded(now)
		case v == hostDown && r != nil && r.bo != nil:
			if r.hang.owed > 0 {
				r.hang.owed = hangProbes // in a row
			}
			o.next = satAdd(now, int64(r.bo.NextBackOff()))
		} // hostDown without a backoff: held by a breaker alone, which says when
		// hostUnsent, hostUnknown: the probe was not sent, or its caller
		// gave up; the next one may go when it was due.
	case v == hostUp && seq > o.downAt:
		// A request sent after the failure that began the outage, or
		// admitted before a hold (the breaker's), came back fine.
		o.probing, o.replaying, o.upAt = false, false, k.sent
		o.setDown(false)
		k.outageEnded(now)
	case o.rare == nil:
	case v == hostUp:
		o.rare.fine++ // of a request sent before the failure
	case v == hostDown:
		o.rare.failed++
		if o.fleet && o.rare.over.seen && !o.rare.over.down {
			// An overload of k's own, in an outage its fleet began: a
			// flood k met, as if its own overload had begun the outage
			// (see overloads). Held by the fleet before its own
			// overloads came back, a process never counted the floods,
			// and its queue went at once when each ended.
			o.rare.over.down, o.rare.over.downAt = true, now
		}
	}
}

// outageEnded takes in, under k.mu at now, that k's outage ended: as a
// flood of overloads or not (see overloadEnded), and the ramp its queue
// leaves at (see rampFrom).
func (k *keyState) outageEnded(now int64) {
	if r := k.out.rare; r != nil {
		held := k.overloadEnded(now)
		r.ramp = r.rampFrom(held)
	}
}

// watching reports, under the key's mutex, whether every answer of the
// key is to be settled under it: while its queue leaves at a ramp after
// an outage (see rampUp), or its overloads are watched (see
// overloadLimit). stalled is kept set meanwhile.
func (o *outage) watching() bool {
	r := o.rare
	return r != nil && (r.ramp > 0 || r.over.trial || r.over.counting())
}

// rampUp widens, under k.mu, the ramp of k's requests after an outage by
// the answer v: one more request may be out for each answer that is not a
// failure, doubling what is out each round trip (TCP's slow start), until
// rampDone are; a failure ends it (the host is down again, or it was
// not). An outage ended let the whole queue go at once, into a host that
// had just come back; into a server that answers floods with 503s naming
// no delay, a flood of 503s each time (see overloads). From the second
// brief flood in a row, the queue leaves at a ramp instead (see
// rampFrom).
func (k *keyState) rampUp(v outageVerdict) {
	r := k.out.rare
	switch {
	case r == nil || r.ramp == 0:
	case k.out.down || v == hostDown:
		r.ramp = 0
	case v == hostUp:
		if r.ramp++; r.ramp >= rampDone {
			r.ramp = 0
		}
	}
}

// rampFrom returns the ramp an outage that ends leaves its key on (see
// rampUp): none, unless more of the answers during it were failures than
// not, and it is the second brief flood in a row or later (see
// overloads); then as many as were not, and one. A failure at random,
// among answers, ramps nothing.
func (r *outageRare) rampFrom(held bool) uint32 {
	if r.failed <= r.fine && !held || r.over.quick < 2 {
		return 0
	}
	return r.fine + 1
}

// rampDone is how many requests out at once end the ramp after an outage
// (see rampUp).
const rampDone = 64

// hold keeps k's queue waiting, as in an outage, until at least until on
// the pacer's clock: an open breaker in hold mode. Called without k.mu.
func (k *keyState) hold(until int64) {
	now := k.env.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	o := &k.out
	if !o.down {
		o.downAt = k.sent
		o.setDown(true)
		o.next = 0 // no probe was due (see replaying)
	}
	// Never in the past: a refused probe must not turn into a busy loop.
	o.next = max(o.next, until, satAdd(now, int64(holdRecheck)))
	k.failLate(now)
	k.dispatch(now)
}

// holdRecheck is the least time before a probe refused by a breaker in
// hold mode is offered to it again.
const holdRecheck = 5 * time.Millisecond

// isProbe reports whether departure seq is the probe of k's host. The
// test of a host that is up is inlined.
func (k *keyState) isProbe(seq uint64) bool {
	return k.out.isDown.Load() && k.isProbeLocked(seq)
}

func (k *keyState) isProbeLocked(seq uint64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.out.probing && k.out.probe == seq
}

// isDown reports whether k's host is down.
func (k *keyState) isDown() bool { return k.out.isDown.Load() }

// nextProbe returns when k's next probe may leave, on the pacer's clock,
// if its host is down and no probe is in flight. Called under k.mu.
func (k *keyState) nextProbe() (int64, bool) {
	if !k.out.down || k.out.probing {
		return 0, false
	}
	if k.out.fleet {
		// k looks again soon (see fleetHold), but the probe that may end
		// the outage is the fleet's.
		return max(k.out.next, k.out.fleetNext), true
	}
	return k.out.next, true
}

// failLate fails, at once, the waiters of k that cannot last until the
// next probe: their deadline comes first. Called under k.mu.
func (k *keyState) failLate(now int64) {
	next, ok := k.nextProbe()
	if !ok || next == math.MaxInt64 {
		return
	}
	k.failBefore(now, next, k.env.wall(next))
}

// replayVerdict is what replayTurn says of a replay by net/http.
type replayVerdict uint8

const (
	replayGo     replayVerdict = iota // send it, as any request
	replayClaim                       // it is the key's replay: send it on a fresh connection
	replayStop                        // stop it: its request waits behind the probe or replay out
	replayFailed                      // stop it: the probe it is broke again
)

// replayTurn decides, when net/http is about to send again departure seq
// of k, a request that met a broken keep-alive connection (see
// connWatch), whether it may. A host that is up gets one such replay at a
// time, sent on a fresh connection: in effect a probe of the host, whose
// answer the queue waits for (probeWait at most: a long call is not a
// host down), and whose failure is a failure of the host. The replays of
// other requests meanwhile, and any while the host is down, are stopped:
// their requests wait in the queue. A probe that net/http would send
// again broke: that is its failure.
func (k *keyState) replayTurn(seq uint64) replayVerdict {
	now := k.env.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	o := &k.out
	switch {
	case o.probing && o.probe == seq:
		return replayFailed
	case o.down:
		return replayStop
	case !o.probing:
		o.probing, o.probe, o.replaying = true, seq, true
		o.next = satAdd(now, int64(probeWait)) // the host is up: no probe is due
		o.stalled.Store(true)                  // its answer, when it comes, settles it (see settle)
		k.dispatch(now)
		return replayClaim
	case o.replaying && now < o.next:
		return replayStop
	}
	return replayGo // the replay out is a long call
}
