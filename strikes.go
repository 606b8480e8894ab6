package headway

import (
	"time"

	"github.com/headway-go/headway/ratelimitheader"
)

// strikes is what a key keeps of throttles that came in a row: a server
// that punishes a client for exceeding its limit blocks the key for much
// longer than its window (a penalty box), often saying nothing of it, or
// only the window's wait, and may restart the block with each request that
// arrives during it. A burst sent into such a block makes it longer, and a
// fixed wait between tries can keep it going forever.
//
// So from a throttle on, until a request sent after it gets any other
// answer, the key sends one request at a time, a try, and after each try
// that is throttled again it pauses for longer: the first pause is the wait
// the server named (the least a retry waits anyway); each one after it is
// twice the last, or the wait the server names if longer, up to the cap on
// server waits (WithMaxServerWait). A block restarted by each try then ends
// after a handful of tries, however long it is. The first answer that is no
// throttle ends the strikes, and the key goes on at its pace from then: the
// requests the try held leave at the pace, not at once on the slots that
// passed while it was out. Over answers of 100-300 ms those were a flight
// of 2-15 at once right after the try, enough to overflow a small bucket
// or a log at the pace that suited it (a bucket of 50/s burst 5 over
// 300 ms with 32 workers: 0.444 of the least time with bare 429s, 0.896
// now; a log of 20 per second over 100 ms with Retry-After: 0.52 -> 0.86).
// A fixed window took such a flight as part of its quota: it loses the
// try's round trip a cycle (20 a second over 300 ms, bare 429s, 32
// workers: 0.926 -> 0.798).
//
// Throttles of requests sent before the last strike came are of the same
// burst: they add no strike. A key has them (keyState.strikes is not nil)
// from a throttle until an answer ends them. Its fields are guarded by the
// key's mutex; times are on the pacer's clock.
type strikes struct {
	n      int    // throttles in a row
	at     int64  // when the first came
	after  uint64 // departures sent when the last strike came
	next   int64  // the next try leaves no earlier
	pause  int64  // the pause after the last strike
	trying bool   // a try is in flight
	try    uint64 // its departure number
	// paused: the next try leaves after a pause, the wait the last strike
	// named or a pause of the strikes, not at once at the pace.
	paused bool
}

// strikesIdle reports, under k.mu, whether k's strikes, if any, can be
// forgotten at now: no try is out, and the last pause ended long ago
// (strikesForget), as a cut pace is forgotten.
func (k *keyState) strikesIdle(now int64) bool {
	s := k.strikes
	return s == nil || (!s.trying && now-s.next > int64(strikesForget))
}

// blockLeast is how long throttles in a row, lone tries among them, last
// at least to be taken for a block: over twice the interval of the
// slowest pace a key believes in (aimdFloor). A bucket that refills
// a request a second gives one back to a lone try within a few pauses.
const blockLeast = 5 * time.Second

// strikesForget is how long after its last pause ended a key's strikes
// no longer keep it from being dropped.
const strikesForget = 10 * time.Minute

// strikeGate reports, under k.mu, whether k may send a request as far as
// its strikes go: not while a try is in flight.
func (k *keyState) strikeGate() bool {
	return k.strikes == nil || !k.strikes.trying
}

// strikeFloor returns d held back to the next try, while k has strikes.
// Called under k.mu.
func (k *keyState) strikeFloor(d int64) int64 {
	if k.strikes != nil {
		return max(d, k.strikes.next)
	}
	return d
}

// strikeTake notes, under k.mu, that departure seq left: while k has
// strikes, it is the try.
func (k *keyState) strikeTake(seq uint64) {
	if s := k.strikes; s != nil {
		s.trying, s.try = true, seq
	}
}

// strike takes in, under k.mu at now, a throttle of departure seq that
// named wait (capped), if hasWait.
func (k *keyState) strike(now int64, seq uint64, sig *ratelimitheader.Signal, wait time.Duration) {
	s := k.strikes
	if s != nil && s.trying && seq == s.try {
		s.trying = false
	}
	if sig.Permanent || (s != nil && seq <= s.after) {
		return // not cured by waiting, or of the burst already struck
	}
	if s == nil {
		s = &strikes{at: now}
		k.strikes = s
		k.striking.Store(true)
	}
	w := int64(0)
	if sig.HasWait {
		w = int64(wait)
	}
	s.n++
	s.after = k.sent
	s.paused = s.n > 1 || w > 0
	if s.n == 1 {
		s.pause = max(w, int64(k.strikeInitial()))
		s.next = satAdd(now, w)
	} else {
		s.pause = min(max(satMul(2, s.pause), w), int64(k.env.cfg.maxRetryAfter))
		s.next = satAdd(now, s.pause)
	}
	if k.aimd.active && s.n > 1 {
		k.aimd.climbFrom(s.next) // nothing is sent until then
	}
	k.failBefore(now, s.next, time.Time{})
}

// failBefore fails, at once, the waiters of k whose deadline comes before
// next, when k's next request may leave: with a *WaitError whose
// NextProbe is nextProbe (zero when next is not a probe's). Called under
// k.mu.
func (k *keyState) failBefore(now, next int64, nextProbe time.Time) {
	for w := k.queue.head; w != nil; {
		nw := w.next
		if w.deadline != 0 && w.deadline < next {
			k.queue.remove(w)
			w.err = &WaitError{
				Wait:      time.Duration(next - now),
				Allowed:   time.Duration(max(w.deadline-now, 0)),
				NextProbe: nextProbe,
			}
			w.ready <- struct{}{}
		}
		w = nw
	}
}

// strikeInitial is the least pause after a second throttle in a row of a
// key whose server named no wait: the outage probes' first interval.
func (k *keyState) strikeInitial() time.Duration {
	if k.env.probe.initial > 0 {
		return k.env.probe.initial
	}
	return defaultProbeInterval
}

// strikeUnsent notes, under k.mu, that departure seq was not sent: if it
// was the try, the next one may go when it was due.
func (k *keyState) strikeUnsent(seq uint64) {
	if s := k.strikes; s != nil && s.trying && s.try == seq {
		s.trying = false
	}
}

// strikeAnswered takes in an answer to dep that was no throttle (throttled
// false), or no answer at all (a transport error, or unsent: failed true).
// The test of a key without strikes is inlined.
func (k *keyState) strikeAnswered(dep *departure, failed bool) {
	if k.striking.Load() {
		k.strikeAnsweredNow(dep.seq, failed)
	}
}

func (k *keyState) strikeAnsweredNow(seq uint64, failed bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.strikes
	if s == nil {
		return
	}
	now := k.env.now()
	switch {
	case !failed && seq > s.after:
		// A request sent after the last strike got through: the key goes
		// on at its pace.
		k.strikes = nil
		k.striking.Store(false)
		k.aimd.triedAt(now, k.sent)
		if s.n >= 2 && len(k.pacer.buckets) == 0 && k.aimd.active && now-s.at >= int64(blockLeast) {
			// Lone tries were refused after pauses, for longer than any
			// rate the key believes in takes to give a request back: the
			// server held the key past its throttle, a block (see
			// aimd.blocked).
			k.aimd.blocked(s.at, now, seq-1)
		}
	case s.trying && seq == s.try:
		s.trying = false // no answer: the next try may go when due
	default:
		return
	}
	// The try held the queue, not the pacer: the pacer's clock runs from
	// its answer (see strikes).
	k.freedAt = max(k.freedAt, now)
	k.dispatch(now)
}
