package ratelimitheader

import (
	"net/http"
	"testing"
	"time"
)

// TestResetsFall: a delta in milliseconds read as seconds falls a
// thousand times faster than the clock; a reset in seconds, a window that
// turns, a glitch of a second or two, never does.
func TestResetsFall(t *testing.T) {
	const ms, s = time.Millisecond, time.Second
	for _, c := range []struct {
		name                string
		prev, next, elapsed time.Duration
		want                bool
	}{
		{"ms read as seconds, 5 ms apart", 10000 * s, 9993 * s, 5150 * us(), true},
		{"ms read as seconds, a second apart", 600000 * s, 599000 * s, s, true},
		{"ms read as seconds, an answer's latency off", 600000 * s, 599950 * s, 70 * ms, true},
		{"seconds: falls as the clock", 3600 * s, 3599 * s, s, false},
		{"seconds, rounded: a second in 5 ms", 60 * s, 59 * s, 5 * ms, false},
		{"a glitch of two seconds in 1 ms", 62 * s, 60 * s, ms, false},
		{"a window turned: later", 10 * s, 9000 * s, s, false},
		{"too fast even for ms", 600000 * s, 500000 * s, s, false},
		{"too slow for ms", 600000 * s, 599500 * s, s, false},
		{"no time", 600000 * s, 599000 * s, 0, false},
		{"time backwards", 600000 * s, 599000 * s, -s, false},
		{"zero next", 600 * s, 0, 600 * ms, false},
	} {
		if got := ResetsFall(c.prev, c.next, c.elapsed); got != c.want {
			t.Errorf("%s: ResetsFall(%v, %v, %v) = %v, want %v", c.name, c.prev, c.next, c.elapsed, got, c.want)
		}
	}
}

func us() time.Duration { return time.Microsecond }

// TestMillisecondResets: with Input.MillisecondResets a bare whole delta of
// the X-RateLimit family counts milliseconds; an epoch, a fraction, a date,
// a field that states its unit, and the IETF fields are read as always.
func TestMillisecondResets(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name  string
		reset [2]string
		want  time.Duration
	}{
		{"bare delta", [2]string{"X-Rate-Limit-Reset", "600000"}, 10 * time.Minute},
		{"epoch seconds", [2]string{"X-Rate-Limit-Reset", "1773144600"}, 10 * time.Minute},
		{"epoch milliseconds", [2]string{"X-Rate-Limit-Reset", "1773144600000"}, 10 * time.Minute},
		{"a fraction", [2]string{"X-Rate-Limit-Reset", "1.5"}, 1500 * time.Millisecond},
		{"a date", [2]string{"X-Rate-Limit-Reset", "2026-03-10T12:10:00Z"}, 10 * time.Minute},
		{"Reset-After says seconds", [2]string{"X-RateLimit-Reset-After", "7"}, 7 * time.Second},
		{"IETF says seconds", [2]string{"RateLimit-Reset", "7"}, 7 * time.Second},
	} {
		h := http.Header{"Date": {"Tue, 10 Mar 2026 12:00:00 GMT"}}
		h.Set(c.reset[0], c.reset[1])
		rem := "X-Rate-Limit-Remaining"
		if c.reset[0] == "RateLimit-Reset" {
			rem = "RateLimit-Remaining"
		} else if c.reset[0] == "X-RateLimit-Reset-After" {
			rem = "X-RateLimit-Remaining"
		}
		h.Set(rem, "5")
		s := Parse(&Input{Status: 200, Header: h, Now: now, MillisecondResets: true})
		if !s.HasRemaining || s.Reset != c.want {
			t.Errorf("%s: Reset %v (remaining known %v), want %v", c.name, s.Reset, s.HasRemaining, c.want)
		}
	}
}
