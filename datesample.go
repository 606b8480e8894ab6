package headway

import "time"

// A server that resets fixed windows at instants it states on its own
// clock (an epoch reset in whole seconds) is waited for until the latest
// instant the bounds on that clock allow (see clockOffset.estimate). Those
// bounds come from Dates, which have whole seconds: a response bounds the
// offset only where its Date's second turned between the request's
// departure and its answer. A client that spends each window's quota at
// once, just after the boundary it waits for, sends its requests at the
// same fraction of a second every window, so the bounds stop narrowing a
// second wide, and every window is entered up to a second late.
//
// dateSample makes the last sampleSlots requests of a window leave at
// chosen instants instead: each just before the server's clock turns a
// second if the offset were the middle of its bounds, so that its Date
// says on which side of the middle the offset lies, and halves the bounds.
// They leave no later than the earliest instant the window may end (the
// stated reset less the second it is rounded to and the offset's width),
// so the server counts them in the window whose quota they spend; and
// only while more requests wait than the window has left, so that the
// requests after them would wait for the next window anyway: a sample
// delays no request past the instant the last of the queue would leave.

// sampleSlots is how many of a window's last requests may be held back to
// read the server's clock.
const sampleSlots = 2

// sampleLead is how long before the window may end a sample must leave,
// for the time it takes to reach the server.
const sampleLead = int64(100 * time.Millisecond)

// dateSampling is the key's plan of the next sample.
type dateSampling struct {
	at   int64 // when the planned sample leaves, on the pacer's clock; 0: none
	sec  int64 // the server's second it is to straddle, in Unix seconds
	done int64 // the last second sampled
}

// dateSample returns when a request that may leave at d under m should
// leave to sample the server's clock: d itself unless it takes one of the
// last sampleSlots requests of a window the model waits for, stated to
// the second (a reset stated to the millisecond says where the window
// ends well enough), and the clock offset is not yet known to
// datesEnough.
func (k *keyState) dateSample(d int64, m *serverModel) int64 {
	s := &k.sample
	if l := m.level(d); !m.window || !m.secondReset || m.rate != 0 || m.resetAt <= d || l > sampleSlots || l < 1 || float64(k.queue.n)+m.pending() <= l {
		s.at = 0
		return d
	}
	lo, hi, ok := k.host.offsetBounds()
	if !ok || hi-lo <= datesEnough {
		s.at = 0
		return d
	}
	if s.at > 0 && s.sec > s.done {
		return max(d, s.at) // the plan stands until the sample leaves (see sampled)
	}
	// The earliest instant the window may end: the reset is the latest
	// one (the lowest offset, the stated second), so less the width of
	// the offset's bounds and the second the reset is rounded to.
	end := m.resetAt - int64(hi-lo) - int64(time.Second)
	mid := lo + (hi-lo)/2
	srv := k.env.wall(d).UnixNano() + int64(mid)
	sec := srv/int64(time.Second) + 1
	if sec <= s.done {
		sec = s.done + 1
	}
	at := d + (sec*int64(time.Second) - srv)
	if at+sampleLead > end {
		s.at = 0
		return d // no second turns early enough: spend the slot now
	}
	s.at, s.sec = at, sec
	return at
}

// sampled notes that a departure left at d: the planned sample, if it was
// due.
func (k *keyState) sampled(d int64) {
	if s := &k.sample; s.at > 0 && d >= s.at {
		s.done, s.at = s.sec, 0
	}
}
