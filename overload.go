package headway

import "time"

// A server that answers a flood with 503s (or 529s) that name no delay,
// as nginx's limit_req does by default, looks to each flood like a host
// gone down: an outage, over as soon as a probe or a request sent beside
// the failure comes back. Held as outages, its floods met 503s again and
// again: 400 requests from 32 workers, against a bucket of 20 a second,
// met 3844-4044 of them. A host that fails some requests at random looks
// the same, one outage at a time, and a pace cut for each of its failures
// falls to its floor (20 % of 503s at random: 2000 requests from one
// worker in 25 minutes, not 3). What tells them apart is whether a slower
// pace meets fewer of them.
//
// So a key whose outages keep being floods (each more failures than not)
// that end within overloadBrief watches them. From the second in a row,
// the queue held leaves at a ramp (see rampUp). At the overloadQuick-th,
// once overloadMeasure has passed since the first ended, it tries a pace:
// what went through a second since the first flood ended, as a bare
// throttle's cut would from it (a tenth under it, climbing back over
// aimdK), for overloadTrial requests, whose overloads are neither outages
// nor throttles meanwhile, only failures their retries answer. The trial
// counts from its first request answered fine, or from overloadBrief
// after it began: the last flood may have spent a window the trial
// begins in. No trial comes unless the floods met an overload with one
// request in five (overloadShare) or more. If at most one request on
// trial met one, a limit refused the floods: the key keeps the pace,
// doubling it each second until a throttle measures the limit (as after
// a first bare throttle), and takes its overloads as a bare throttle's
// from then on, as long as they come within overloadSpan of each other.
// Otherwise the key gets its pace back, takes them as outages again, and
// tries no pace for overloadSpan.
//
// Overloads of a host failing at random rarely pass (the chance that 30
// requests meet at most one failure is 1 % at 20 % of failures, and the
// floods of one failing less often meet fewer than one in five), and fail
// the checks that follow: a key that takes its overloads for throttles
// and meets them in more than overloadCheck/20 bursts in overloadCheck
// departures forgets the pace it learned, as after a failed trial.
// overloadStrikes throttles in a row (over 6 s of tries refused) put it
// back on outages too: the host may be down after all.
//
// A fleet that shares its outages (see SharedProber) meets each flood
// in every process: a process held by its fleet's outage counts it as a
// flood of its own once it counts floods, unless its own answers showed
// the host up, so that the processes try their paces at the same flood.
// Its share of overloads is over the requests it sent, not the departures
// its fleet's holds sent back, and needs overloadFew of them, or
// overloadTrial requests: a process held most of the time sends few. Its
// trial is judged over overloadTrial answers. A trial that passed is
// told to the fleet (see SharedVerdict), whose processes take their own
// overloads for a limit's from then on: each one's trial meets the
// refusals of the others' floods, and one that passed is enough. One whose
// overloads then come too often for a limit's takes it back, and no word
// of the fleet's is taken before overloadSpan. 3 processes x 4 workers
// against a bucket of 20/s met 432-473 503s for 300 requests; now 45-66
// in 19 runs of 20 (372 in one, whose trials began at different floods
// and all failed); one process of 12, 29-77.
//
// Measured (virtual time, 20 ms answers, 20 runs each): a bucket of 20/s
// burst 10 answering bare 503s, 400 requests, met 60-281 of them with 32
// workers (3844-4044 before the rule), 38-74 with 8 (823); a fixed window
// of 20 a second, 54-231 with 32 workers (772-790) and 24-116 with 8
// (133-138); a sliding one, 53-214 and 25-126; at 0.81-0.99 of the least
// time, about what bare 429s get. Before the trial waited out a second
// and a spent window, it failed in about 1 run of 4 against windows with
// 32 workers, whose floods then met 571-1161. 2000 requests, 60 seeds,
// 503s at random: 5 % with 32 workers, 2.20 s on average (2.22 before
// these changes; 2.16 before the rule); 10 %, 3.06 s (3.12); 20 % with 8
// workers, 16.40 s (16.46; 15.48), 22.5 s at most. A trial fails at its
// second request refused, not after overloadTrial: its pace, measured
// over floods of a failing host, can be as slow as 2 a second.

// The rule's constants (see above).
const (
	overloadBrief   = 2 * time.Second
	overloadQuick   = 3
	overloadTrial   = 30
	overloadShare   = 0.2 // of the requests the floods met overloads, at least
	overloadSpan    = 10 * time.Minute
	overloadStrikes = 5
	overloadMeasure = time.Second // the least span the trial's rate is measured over
	overloadFew     = 5           // overloads the floods met, at least, unless they sent overloadTrial requests
)

// overloads is what a key keeps for the rule above, in its outageRare.
// Its fields are guarded by the key's mutex.
type overloads struct {
	// seen: the answer being settled is an overload. down: one began the
	// outage under way, at downAt (ns, the pacer's clock). held: the
	// key's fleet began it, at downAt, while the key counted floods, and
	// none of the key's own answers met an overload yet.
	seen, down, held bool
	downAt           int64
	// quick counts the brief floods in a row; the first ended at from,
	// when the key had sent sent; of the departures since, pre counts
	// the overloads answered, ok those answered fine, and unsent those
	// not sent after all (held by the key's fleet, mostly).
	quick           uint8
	from            int64
	sent            uint64
	pre, ok, unsent uint32
	trial           bool   // a pace is on trial
	trialFrom       uint64 // the departures sent when it began
	tn              uint32 // the requests on trial that met an overload
	tans            uint32 // and those answered, either way
	tstart          int64  // when the trial began
	saved           *savedPace
	// limit: the key takes its overloads for throttles, the last at
	// limitAt; of the departures since it had sent lsent, ln met one
	// (in a burst already refused, one). barred: no pace is tried before
	// then.
	limit   bool
	limitAt int64
	lsent   uint64
	ln      uint32
	barred  int64
	// doubt: the key's overloads came too often for a limit's, at the
	// pace it set: its fleet's word that they are one is not taken
	// before then (see SharedVerdict).
	doubt int64
}

// overloadCheck is how many departures of a key that takes its overloads
// for throttles are checked at a time: more than overloadCheck/20 of them
// refused (in bursts already refused, one) are a host failing at random
// after all, not a limit, whose pace has settled under the pace it
// refuses (see overloadLimit).
const overloadCheck = 200

// counting reports whether o counts the answers of its key (see
// overloadLimit): from the first brief flood until a pace is tried.
func (o *overloads) counting() bool { return o.quick > 0 && !o.trial && !o.limit }

// What an overload answered to a key is (see overloadLimit).
type overloadKind uint8

const (
	overloadOutage   overloadKind = iota // the host is down, for now
	overloadThrottle                     // a limit refused the pace
	overloadTried                        // a failure of a request on trial
)

// overloadLimit tells what the overload (a 503 or 529 naming no delay)
// answered at now to departure seq of k is, and notes it. heard: k's
// fleet takes them for a limit's (see SharedVerdict), as k then does too,
// unless it doubts it. Called without k.mu.
func (k *keyState) overloadLimit(now int64, seq uint64, heard bool) overloadKind {
	k.mu.Lock()
	defer k.mu.Unlock()
	o := &k.out.rareState().over
	if heard && !o.limit && now >= o.doubt {
		// Another process's trial passed: the trial of k, if any, needs
		// not go on (each process's pace meets the refusals of the
		// others' requests, which its trial cannot tell from its own).
		o.quick, o.barred = 0, 0
		k.limitFound(now)
	}
	switch {
	case o.trial:
		switch {
		case seq <= o.trialFrom:
		case o.tans <= o.tn && now-o.tstart < int64(overloadBrief):
			// No request on trial has been answered fine yet: the flood
			// before the trial may have spent a window the trial starts
			// in. The trial starts again from what is sent next.
			o.trialFrom, o.tn, o.tans = k.sent, 0, 0
		default:
			if o.tn++; o.tn > 1 {
				// The trial cannot pass: no need to send the rest at its
				// pace, which can be slow.
				k.trialFailed(now)
			}
		}
		return overloadTried
	case o.limit && now-o.limitAt < int64(overloadSpan) && (k.strikes == nil || k.strikes.n < overloadStrikes):
		o.limitAt = now
		if k.strikes == nil || seq > k.strikes.after {
			o.ln++
		}
		switch {
		case o.ln <= overloadCheck/20 && k.sent-o.lsent < overloadCheck:
			return overloadThrottle
		case o.ln <= overloadCheck/20:
			o.lsent, o.ln = k.sent, 0
			return overloadThrottle
		}
		// Refused too often for a limit, at the pace it set: a host
		// failing at random. The pace goes, and no pace is tried again
		// for a while; nor is the fleet's word taken that they are a
		// limit's, which the fleet takes back.
		k.aimd, k.aimdB = aimd{}, bucket{}
		o.barred = satAdd(now, int64(overloadSpan))
		o.doubt = o.barred
		k.tellFleet(tellNoLimit)
	}
	if o.limit {
		o.limit, o.quick = false, 0
	}
	o.seen = true
	if o.quick > 0 && seq > o.sent {
		o.pre++
	}
	return overloadOutage
}

// overloadEnded notes, under k.mu at now, that k's outage ended: a brief
// flood of overloads, or not (see overloadLimit). The third brief flood
// in a row puts a pace on trial.
func (k *keyState) overloadEnded(now int64) (held bool) {
	r := k.out.rare
	if r == nil {
		return false
	}
	o := &r.over
	if !o.down && !o.held {
		return false
	}
	held = !o.down
	o.down, o.held = false, false
	switch {
	case now-o.downAt > int64(overloadBrief):
		o.quick = 0
		return false
	case held && (o.quick == 0 || r.fine > r.failed):
		// Held by its fleet, the key's own answers showed the host up:
		// the fleet's outage was no flood the key met.
		return false
	case !held && r.failed <= r.fine:
		o.quick = 0
		return false
	}
	if o.quick = min(o.quick+1, 100); o.quick == 1 {
		o.from, o.sent, o.pre, o.ok, o.unsent = now, k.sent, 0, 0, 0
	}
	if now < o.barred {
		// A trial failed not long ago: the floods still leave at a ramp
		// (see rampFrom), and no pace is tried.
		o.quick = min(o.quick, overloadQuick-1)
		return held
	}
	if o.quick < overloadQuick || now-o.from < int64(overloadMeasure) {
		// Too soon to measure a rate: floods close together would
		// measure it from a handful of answers over a few hundredths of
		// a second.
		return held
	}
	// Of the requests sent: a key held by its fleet's outage takes
	// departures that do not leave, which would dilute the share of a
	// fleet's floods (3 processes x 4 workers met overloads with 0.09 to
	// 0.14 of their departures, not one in five).
	n := k.sent - o.sent - min(uint64(o.unsent), k.sent-o.sent)
	if o.pre < overloadFew && n < overloadTrial {
		// Too few to tell: 1 overload in 4 requests sent (a process
		// held by its fleet's outages sends few) is what a host failing
		// one answer in 20 gives nearly one time in 5. Later floods add
		// to them.
		return held
	}
	if float64(o.pre) < overloadShare*float64(max(n, 1)) {
		// Too few of the floods' requests met an overload for a trial
		// to tell a limit: none is tried for a while.
		o.quick, o.barred = 0, satAdd(now, int64(overloadSpan))
		return false
	}
	rate := float64(o.ok) / (float64(now-o.from) / 1e9)
	if rate <= 0 {
		o.quick = 0
		return false
	}
	o.trial, o.trialFrom, o.tn, o.tans, o.tstart = true, k.sent, 0, 0, now
	o.saved = &savedPace{k.aimd, k.aimdB}
	k.paceAt(now, rate)
	return held
}

// overloadAnswered takes in, under k.mu, the answer to departure seq of
// k while a pace is on trial: past overloadTrial requests, it judges the
// trial (see overloadLimit).
func (k *keyState) overloadAnswered(now int64, seq uint64) {
	r := k.out.rare
	if r == nil || !r.over.trial || seq <= r.over.trialFrom {
		return
	}
	o := &r.over
	if o.tans++; o.tans <= overloadTrial {
		// Answers, not departures: a key held by its fleet takes
		// departures that do not leave.
		return
	}
	if o.tn <= 1 {
		k.limitFound(now)
		k.tellFleet(tellLimit)
		return
	}
	k.trialFailed(now)
}

// limitFound makes k, under k.mu at now, take its overloads for a limit's
// refusals: its trial passed, or another process's did (see
// SharedVerdict).
func (k *keyState) limitFound(now int64) {
	o := &k.out.rareState().over
	o.trial = false
	o.limit, o.limitAt, o.saved = true, now, nil
	o.lsent, o.ln = k.sent, 0
	if k.aimd.active {
		// The floods' rate, held down by the holds between them, is under
		// the limit's: the pace doubles each second from it until a
		// throttle measures the limit, as after a first bare throttle.
		// (A key that never tried a pace has none: its first throttle
		// measures one.)
		k.aimd.slow, k.aimd.cutAt = true, now
	}
}

// tellFleet notes, under k.mu, what k is to tell its fleet of its
// overloads, if it shares them (see Transport.tellVerdict).
func (k *keyState) tellFleet(what int32) {
	if k.env.verdict != nil && k.out.stall != nil {
		k.out.stall.tell.Store(what)
	}
}

// trialFailed ends, under k.mu at now, the trial of a pace that did not
// pass: the key gets its pace back, and tries none for overloadSpan.
func (k *keyState) trialFailed(now int64) {
	o := &k.out.rareState().over
	if p := o.saved; p != nil {
		k.aimd, k.aimdB = p.a, p.b
	}
	o.trial, o.saved, o.quick, o.barred = false, nil, 0, satAdd(now, int64(overloadSpan))
}

// paceAt paces k, under k.mu at now, as a bare throttle's cut would from
// a measured rate: at aimdBeta of it, climbing back to it over aimdK.
func (k *keyState) paceAt(now int64, rate float64) {
	a := &k.aimd
	if !a.active {
		a.ceiling = k.ceiling()
		k.model.track()
	}
	a.cycles()
	a.active, a.slow = true, false
	a.wmax = max(rate, aimdFloor)
	if a.ceiling > 0 {
		a.wmax = min(a.wmax, a.ceiling)
	}
	a.cutAt, a.climb, a.cutSeq = now, 0, k.sent
	k.aimdB.Interval, k.aimdB.Burst, k.aimdB.Unweighted = a.interval(now), 1, true
	k.aimdB.TAT = now
	k.noteLearning()
}
