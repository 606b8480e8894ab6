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
//
// windowSample does the same for a window learned from the spacing of
// throttles whose waits end at Retry-After dates (see learnedWindow),
// which is entered when such a date comes on the same estimate.

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
	if l := m.level(d); !m.window || !m.secondReset || m.rate != 0 || m.resetAt <= d || l > sampleSlots || l < 1 || float64(k.queue.n)+m.pending() <= l {
		k.sample.at = 0
		return d
	}
	// The reset is the latest instant the window may end (the lowest
	// offset, the stated second): it may end as much as the second it is
	// rounded to before.
	return k.sampleBefore(d, m.resetAt-int64(time.Second), datesEnough)
}

// windowSample is dateSample for a window learned from throttles whose
// waits end at Retry-After dates (see learnedWindow): its end is such a
// date, read with the lowest offset the bounds allow, and a date says to
// the second where the boundary is.
//
// A sample is held only while more requests wait, or are out and may
// come back for more, than the window has left: the ones after it would
// wait for the next window anyway. A batch's last requests are not held
// for long: the answer to the last of the others lets them go (dispatch
// runs while that answer is still counted as out, hence the one more).
func (k *keyState) windowSample(d int64) int64 {
	w := &k.window
	if !w.dated || d >= w.end || w.left > sampleSlots || w.left < 1 || float64(k.queue.n)+float64(k.unseenN()) <= w.left+1 {
		k.sample.at = 0
	} else {
		d = k.sampleBefore(d, w.end, windowDatesEnough)
	}
	// Answers dispatch while a sample is held (see answered).
	if held := k.sample.at != 0; k.sampling.Load() != held {
		k.sampling.Store(held)
	}
	return d
}

// windowDatesEnough is the width of the offset's bounds past which a
// learned window takes no more samples: a window is entered late by that
// much at most (by the offset's error, which is under the width). Each
// sample halves the width and holds a request up to a second within its
// window: it costs nothing while the requests after it wait for the next
// window, but the last window of a batch ends that much later. From a
// second's width, two samples (two windows) reach a quarter of a second;
// four would reach 62 ms.
const windowDatesEnough = 250 * time.Millisecond

// sampleBefore returns when a request that may leave at d should leave to
// sample the server's clock, in a window whose end, read with the lowest
// offset the bounds allow, is at the latest end, while the bounds are
// wider than enough.
func (k *keyState) sampleBefore(d, end int64, enough time.Duration) int64 {
	s := &k.sample
	lo, hi, ok := k.host.offsetBounds(k.env.wall(d))
	if !ok || hi-lo <= enough {
		s.at = 0
		return d
	}
	if s.at > 0 && s.sec > s.done {
		return max(d, s.at) // the plan stands until the sample leaves (see sampled)
	}
	// The earliest instant the window may end: less the width of the
	// offset's bounds.
	end -= int64(hi - lo)
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
		if k.sampling.Load() {
			k.sampling.Store(false)
		}
	}
}
