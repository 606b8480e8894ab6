package sharedquota

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/headway-go/headway"
)

// TestLeaseSlots: with leases of 10, a process takes 10 slots of the
// shared schedule in one round trip and hands them out in order; a second
// process's lease comes after them. The rate at 500/s, and the round trips
// per request through the Transport, are BenchmarkLease500's and
// BenchmarkTransportRoundTrips's: this test checks the schedule, at one
// slot a second, so that no scheduling noise can blur it.
func TestLeaseSlots(t *testing.T) {
	addr := redisAddr(t)
	a := newQuota(t, newClient(t, addr), WithLease(10), WithHeartbeat(time.Hour))
	b := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix), WithLease(10), WithHeartbeat(time.Hour))
	defer b.Close()
	lim := headway.Every(time.Second)
	for i := range 25 {
		if d := reserve(t, a, "k", 1, lim); !near(d, time.Duration(i)*time.Second) {
			t.Fatalf("a's reservation %d waits %v, want about %ds", i, d, i)
		}
	}
	// 25 reservations: 3 leases and the first announcement.
	if s := a.Stats(); s.RoundTrips > 4 || s.Leased != 25 {
		t.Fatalf("stats %+v: want 25 leased in 4 round trips", s)
	}
	// a leased 30 slots: b's first comes after them.
	if d := reserve(t, b, "k", 1, lim); !near(d, 30*time.Second) {
		t.Fatalf("b's first reservation waits %v, want about 30s", d)
	}
	// A pause drops the slots a holds: its next reservation leases anew,
	// after the pause and after b's lease.
	if err := a.Pause(context.Background(), "k", 50*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := reserve(t, a, "k", 1, lim); !near(d, 50*time.Second) {
		t.Fatalf("after a pause, a waits %v, want about 50s", d)
	}
}

// runLease runs 3 quotas with leases of lease slots, 8 goroutines each,
// reserving and waiting for dur; it returns the round trips, the
// reservations and the departures.
func runLease(t testing.TB, rate, burst, lease int, dur time.Duration) (trips, reqs int64, deps []time.Time) {
	addr := redisAddr(t)
	prefix := testPrefix(t)
	lim := []headway.Limit{headway.PerSecond(rate).WithBurst(burst)}
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	qs := make([]*Redis, 3)
	for i := range qs {
		qs[i] = NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(prefix), WithLease(lease))
		for range 8 {
			wg.Go(func() {
				for ctx.Err() == nil {
					d, err := qs[i].Reserve(ctx, "k", lim, 1, forever)
					if err != nil {
						return
					}
					at := time.Now().Add(d)
					select {
					case <-time.After(d):
					case <-ctx.Done():
						return
					}
					mu.Lock()
					deps = append(deps, at)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for _, q := range qs {
		q.Close()
		s := q.Stats()
		trips += s.RoundTrips
		reqs += s.Reservations
	}
	return trips, reqs, deps
}
