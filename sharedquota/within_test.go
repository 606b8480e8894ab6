package sharedquota

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/headway-go/headway"
)

// TestReserveSpendsNothingBeyondWithin: a reservation whose wait is longer
// than the caller can wait spends nothing, in every path: the lean script
// (one limit), the general one (several), a lease, and the fallback. The
// next reservation that can wait gets the slot refused. (Issue 10, item 1:
// overload used to spend slots nobody could use, and stalled the fleet.)
func TestReserveSpendsNothingBeyondWithin(t *testing.T) {
	addr := redisAddr(t)
	slow := headway.Every(time.Second)
	wide := headway.PerSecond(1000).WithBurst(1000)
	for _, tc := range []struct {
		name   string
		opts   []Option
		limits []headway.Limit
	}{
		{"one limit", nil, []headway.Limit{slow}},
		{"two limits", nil, []headway.Limit{slow, wide}},
		{"lease", []Option{WithLease(10)}, []headway.Limit{slow}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newQuota(t, newClient(t, addr), tc.opts...)
			b := NewRedis(newClient(t, addr), append(tc.opts, WithPrefix(a.cfg.prefix), WithTimeout(slowTimeout))...)
			defer b.Close()
			ctx := context.Background()
			within := 2500 * time.Millisecond
			var got []time.Duration
			for range 30 {
				d, err := a.Reserve(ctx, "k", tc.limits, 1, within)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, d)
			}
			// Slots at 0, 1s and 2s; then 27 refusals of the slot at 3s.
			for i, d := range got {
				want := min(time.Duration(i), 3) * time.Second
				if !near(d, want) {
					t.Fatalf("reservation %d within %v: wait %v, want about %v (all: %v)", i, within, d, want, got)
				}
			}
			// The slot refused 27 times is still there, for any process.
			if d := reserve(t, b, "k", 1, tc.limits...); !near(d, 3*time.Second) {
				t.Fatalf("after the refusals, the next wait is %v, want about 3s", d)
			}
		})
	}
	t.Run("fallback", func(t *testing.T) {
		c := newClient(t, "127.0.0.1:"+strconv.Itoa(freePort(t))) // nothing listens
		q := newQuota(t, c)
		var got []time.Duration
		for range 10 {
			d, err := q.Reserve(context.Background(), "k", []headway.Limit{slow}, 1, 1500*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, d)
		}
		if q.Stats().Degraded != 10 {
			t.Fatalf("stats %+v, want 10 degraded", q.Stats())
		}
		// The fallback starts empty: it admits one slot at 1s, nothing
		// past 1.5s, and refuses without spending: the last wait is the
		// first refused one's.
		if got[9] <= 1500*time.Millisecond || got[9] > got[8] {
			t.Fatalf("fallback waits %v: refusals spend", got)
		}
		if d := reserve(t, q, "k", 1, slow); !near(d, got[9]) {
			t.Fatalf("after the refusals the fallback waits %v, want %v", d, got[9])
		}
	})
}

// TestLocalPacerWithin: the fallback's pacer, on its own clock.
func TestLocalPacerWithin(t *testing.T) {
	var p localPacer
	s := int64(time.Second)
	p.start([]headway.Limit{headway.Every(time.Second).WithBurst(2)}, 1, -2*s) // full at 0
	for i, want := range []int64{0, 0, s, 2 * s} {
		if d := p.reserve(0, 0, 1, 2*s); d != want {
			t.Fatalf("reservation %d at 0 leaves at %v, want %v", i, time.Duration(d), time.Duration(want))
		}
	}
	for range 3 {
		if d := p.reserve(0, 0, 1, 2*s); d != 3*s {
			t.Fatalf("refused reservation leaves at %v, want 3s", time.Duration(d))
		}
	}
	if d := p.reserve(0, 0, 1, 3*s); d != 3*s {
		t.Fatalf("after refusals: %v, want 3s", time.Duration(d))
	}
}

// TestLocalPacerStartsEmpty: the fallback's pacer, entered at from, lets
// its first request go one interval later (its share of the limit, among
// live processes), not a burst at once; its floors say how far ahead it
// has spent each limit.
func TestLocalPacerStartsEmpty(t *testing.T) {
	var p localPacer
	s := int64(time.Second)
	lims := []headway.Limit{headway.Every(time.Second).WithBurst(4)}
	p.start(lims, 2, 0) // 2 processes: one every 2s, burst 2
	for i, want := range []int64{2 * s, 4 * s, 6 * s} {
		if d := p.reserve(0, 0, 1, 100*s); d != want {
			t.Fatalf("reservation %d leaves at %v, want %v", i, time.Duration(d), time.Duration(want))
		}
	}
	if f := p.floors(nil, lims, 0); f[0] != int64(10*time.Second/time.Microsecond) {
		t.Fatalf("floors %v, want 10s in µs (the TAT after 3 of 2s, from empty at 4s)", f)
	}
	if f := p.floors(nil, []headway.Limit{headway.PerSecond(5)}, 0); f[0] != 0 {
		t.Fatalf("floors for other limits %v, want 0", f)
	}
}

// TestLocalPacerBriefFallbackCharges: a fallback that sent less than a
// bucket's worth (a call or two timed out) tells Redis only the slots it
// took, not its empty start: a slow call must not push the fleet's
// schedule back by a bucket.
func TestLocalPacerBriefFallbackCharges(t *testing.T) {
	var p localPacer
	s := int64(time.Second)
	lims := []headway.Limit{headway.Every(time.Second).WithBurst(4)}
	p.start(lims, 2, 0) // one every 2s, burst 2: empty at 0
	if f := p.floors(nil, lims, 0); f[0] != 0 {
		t.Fatalf("nothing sent: floors %v, want none", f)
	}
	if d := p.reserve(0, 0, 1, 100*s); d != 2*s {
		t.Fatalf("first fallback slot at %v, want 2s", time.Duration(d))
	}
	// One request at 2s: the shared bucket is charged one shared interval
	// (1s) after it, not the local TAT (6s).
	if f := p.floors(nil, lims, 0); f[0] != int64(3*time.Second/time.Microsecond) {
		t.Fatalf("floors %v, want 3s in µs", f)
	}
}
