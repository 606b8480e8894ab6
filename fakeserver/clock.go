package fakeserver

import (
	"math/bits"
	"time"
)

// serverClock is the server's own clock: it maps the instants of
// Config.Now (Unix ns) to the server's, ClockSkew ahead and ClockDrift more
// ahead for each second since DriftFrom. The limiters count on it, as a real
// server counts on its own clock.
type serverClock struct {
	skew  int64 // ClockSkew
	drift int64 // ClockDrift: ns gained per second of Now, in (-1e9, 1e9)
	from  int64 // DriftFrom, Unix ns
}

// clock returns cfg's server clock; drift counts from from when
// cfg.DriftFrom is zero.
func (cfg *Config) clock(from time.Time) serverClock {
	c := serverClock{skew: int64(cfg.ClockSkew), drift: int64(cfg.ClockDrift)}
	if c.drift != 0 {
		if !cfg.DriftFrom.IsZero() {
			from = cfg.DriftFrom
		}
		c.from = from.UnixNano()
	}
	return c
}

// at returns the server's clock at t of Now's, in Unix ns. It never goes
// back while t goes forward.
func (c serverClock) at(t int64) int64 {
	s := t + c.skew
	if c.drift != 0 {
		d := t - c.from
		s += d/1e9*c.drift + d%1e9*c.drift/1e9
	}
	return s
}

// time returns the server's clock at t of Now's.
func (c serverClock) time(t time.Time) time.Time {
	return time.Unix(0, c.at(t.UnixNano()))
}

// span returns how long Now's clock takes while the server's advances by d
// (d >= 0), rounded up: d·1e9/(1e9+drift).
func (c serverClock) span(d int64) int64 {
	if c.drift == 0 || d <= 0 {
		return d
	}
	hi, lo := bits.Mul64(uint64(d), 1e9)
	den := uint64(1e9 + c.drift)
	if hi >= den {
		return 1<<63 - 1
	}
	q, r := bits.Div64(hi, lo, den)
	if r != 0 {
		q++
	}
	if q > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(q)
}

// clampDrift bounds a ClockDrift to what a clock that goes forward can
// gain or lose: less than a second per second.
func clampDrift(d time.Duration) time.Duration {
	const most = time.Second - time.Millisecond
	return min(max(d, -most), most)
}
