package sharedquota

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/headway-go/headway"
)

// TestLeaseRoundTrips: three processes (three quotas here) at 500 requests
// a second in all, with leases of 10: Redis sees at most 0.2 round trips
// per request, heartbeats included, and the departures keep to the limit.
func TestLeaseRoundTrips(t *testing.T) {
	if testing.Short() {
		t.Skip("a 2s run")
	}
	const rate, burst = 500, 10
	trips, reqs, deps := runLease(t, rate, burst, 10, 2*time.Second)
	perReq := float64(trips) / float64(reqs)
	t.Logf("%d requests, %d round trips: %.3f per request", reqs, trips, perReq)
	if perReq > 0.2 {
		t.Errorf("%.3f round trips per request, want at most 0.2", perReq)
	}
	// In any second: no more than the limit, its burst, and one lease per
	// process (slots used late).
	if p := peakIn(deps, time.Second); p > rate+burst+3*10 {
		t.Errorf("peak %d departures in a second", p)
	}
	if float64(reqs) < 0.9*rate*2 {
		t.Errorf("only %d requests in 2s at %d/s", reqs, rate)
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
		qs[i] = NewRedis(newClient(t, addr), WithPrefix(prefix), WithLease(lease))
		for range 8 {
			wg.Go(func() {
				for ctx.Err() == nil {
					d, err := qs[i].Reserve(ctx, "k", lim, 1)
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

func peakIn(ts []time.Time, w time.Duration) int {
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	best, i := 0, 0
	for j := range ts {
		for ts[j].Sub(ts[i]) >= w {
			i++
		}
		best = max(best, j-i+1)
	}
	return best
}
