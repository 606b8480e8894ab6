package sharedquota

import (
	"context"
	"time"

	"github.com/headway-go/headway"
)

// reserveLease serves a one-unit reservation, asked for at start, from the
// key's lease, taking a new lease from Redis when the last one is spent.
// One caller at a time takes a lease; the others wait for it as long as a
// call to Redis of their own could take (see callBound), then fall back. A
// slot is taken only when its wait is within within; a new lease holds
// only such slots.
func (r *Redis) reserveLease(ctx context.Context, ks *keyState, limits []headway.Limit, within time.Duration, start int64) (time.Duration, error) {
	if d, ok := r.takeSlot(ks, within); ok {
		return d, nil
	}
	select {
	case ks.leaseSem <- struct{}{}:
	default:
		bound, cut := r.callBound(ctx)
		tm := time.NewTimer(bound)
		select {
		case ks.leaseSem <- struct{}{}:
			tm.Stop()
		case <-ctx.Done():
			tm.Stop()
			return 0, ctx.Err()
		case <-tm.C:
			var err error = context.DeadlineExceeded
			if cut {
				err = &cutShort{share: bound, err: err}
			}
			return r.degrade(ks, limits, 1, within, start, &UnavailableError{Op: "reserve", Err: err})
		}
	}
	defer func() { <-ks.leaseSem }()
	if d, ok := r.takeSlot(ks, within); ok { // another caller took a lease meanwhile
		return d, nil
	}
	if err := r.usable(ks); err != nil {
		return r.degrade(ks, limits, 1, within, start, err)
	}
	n := r.cfg.leaseSize
	withinUs := int64(within / time.Microsecond)
	var (
		v     any
		err   error
		lt    learned
		waits []int64
		tail  replyTail
		sent  int64
	)
	for again := true; again; {
		ks.mu.Lock()
		pauseFloor, floors := ks.floors(limits, r.now())
		args := argsFor(limits, 1, n, r.marginMs(), withinUs, r.capUs(), pauseFloor, floors)
		if len(limits) == 0 {
			args = append(args, r.cfg.id)
		}
		ks.mu.Unlock()
		sent = r.now()
		v, err = r.eval(ctx, reserveScript, ks.keys, args)
		if err == nil && len(limits) == 0 {
			v, lt, err = learnedTail(v)
		}
		if err == nil {
			waits, tail, err = reserveReply(make([]int64, 0, n), v, n, r.maxReplyUs(), r.capUs())
		}
		// Redis forgot what this process knew it held (see Reserve).
		again = err == nil && r.forgot(ks, limits, r.now(), waits[0], tail)
	}
	if err == nil {
		r.up(ks)
		ks.shared(limits, sent, r.now(), waits[len(waits)-1], withinUs, tail, 0)
		if lt.held {
			ks.mu.Lock()
			ks.noteHeld(r.now() + waits[0]*1000)
			ks.mu.Unlock()
			r.stats.reservations.Add(1)
			return time.Duration(waits[0]) * time.Microsecond, nil
		}
		if len(waits) == 1 && waits[0] > withinUs {
			r.stats.reservations.Add(1)
			return time.Duration(waits[0]) * time.Microsecond, nil // nothing spent
		}
		// The waits count from Redis's now, somewhere in the round
		// trip; counting them from its end makes every slot a little
		// late, never early.
		now := r.now()
		if len(limits) == 0 {
			ks.heardCut(now, lt.cutSeq) // before the new slots, booked after it
		}
		ks.mu.Lock()
		ks.slots = ks.slots[:0]
		for _, w := range waits {
			ks.slots = append(ks.slots, now+w*int64(time.Microsecond))
		}
		if len(limits) == 0 {
			ks.sawPace(now, lt.pace)
			ks.noteDeps(lt.seq, ks.slots)
		}
		ks.mu.Unlock()
		if d, ok := r.takeSlot(ks, max(within, time.Duration(waits[0])*time.Microsecond)); ok {
			return d, nil
		}
		// Every slot is already too old: a lease larger than
		// WithLeaseMaxAge lets the process use. Fall through.
		err = &ReplyError{Script: "reserve", Reply: v, Reason: "every leased slot expired on arrival"}
	}
	if r.failed(ctx, ks, err) {
		return 0, ctx.Err()
	}
	return r.degrade(ks, limits, 1, within, start, err)
}

// takeSlot hands out the key's next leased slot that is not too old, and
// drops those that are. A slot further than within from now is left for a
// later request: takeSlot then returns its wait, over within, having spent
// nothing.
func (r *Redis) takeSlot(ks *keyState, within time.Duration) (time.Duration, bool) {
	now := r.now()
	oldest := now - int64(r.cfg.leaseMaxAge)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	i := 0
	for i < len(ks.slots) && ks.slots[i] < oldest {
		i++
	}
	if i == len(ks.slots) {
		ks.slots = ks.slots[:0]
		return 0, false
	}
	d := max(ks.slots[i], ks.pauseUntil) - now
	if d > int64(within) {
		ks.slots = ks.slots[i:]
		r.stats.reservations.Add(1)
		return time.Duration(d), true
	}
	ks.slots = ks.slots[i+1:]
	r.stats.leased.Add(1)
	r.stats.reservations.Add(1)
	return time.Duration(max(d, 0)), true
}
