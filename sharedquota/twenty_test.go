package sharedquota

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/headway-go/headway"
)

// TestTwentyClientsShareOneSchedule: 20 quotas, each with a client of its
// own, reserve on one key at once: their departures together keep to one
// GCRA schedule (the burst at once, then one interval apart), and after a
// pause one of them sets, none leaves before its end and they leave one
// interval apart, not all at once. Each departure is checked at the latest
// it can be (the end of its call plus its wait), so a loaded machine can
// only make the schedule look slower, never faster than it is.
func TestTwentyClientsShareOneSchedule(t *testing.T) {
	for _, lease := range []int{0, 4} {
		t.Run("lease="+strconv.Itoa(lease), func(t *testing.T) {
			const (
				n     = 20
				per   = 3
				T     = 100 * time.Millisecond
				burst = 3
			)
			addr := redisAddr(t)
			prefix := testPrefix(t)
			qs := make([]*Redis, n)
			for i := range qs {
				qs[i] = newQuota(t, newClient(t, addr), WithPrefix(prefix), WithLease(lease))
			}
			lim := []headway.Limit{headway.Every(T).WithBurst(burst)}
			round := func() (start time.Time, deps []time.Time) {
				var mu sync.Mutex
				var wg sync.WaitGroup
				start = time.Now()
				for _, q := range qs {
					for range per {
						wg.Go(func() {
							d, err := q.Reserve(context.Background(), "k", lim, 1, forever)
							if err != nil {
								t.Error(err)
								return
							}
							latest := time.Now().Add(d)
							mu.Lock()
							deps = append(deps, latest)
							mu.Unlock()
						})
					}
				}
				wg.Wait()
				slices.SortFunc(deps, func(a, b time.Time) int { return a.Compare(b) })
				return start, deps
			}
			check := func(what string, from time.Time, deps []time.Time) {
				t.Helper()
				for k, d := range deps {
					if least := from.Add(time.Duration(k-burst+1) * T); d.Before(least) {
						t.Fatalf("%s: departure %d at %v, before %v: faster than the limit (%d in all)",
							what, k, d.Sub(from), least.Sub(from), len(deps))
					}
				}
			}
			start, deps := round()
			check("first round", start, deps)
			if s := qs[7].Stats(); s.Degraded != 0 || s.Errors != 0 {
				t.Fatalf("stats %+v", s)
			}
			// The schedule is booked some 6s ahead (with leases, more): a
			// pause past it holds every later reservation until its end.
			const pause = 30 * time.Second
			before := time.Now()
			if err := qs[0].Pause(context.Background(), "k", pause); err != nil {
				t.Fatal(err)
			}
			// The others hear of it through the subscription, a moment
			// later: until then a process with leased slots may use them,
			// as it may send a request the instant before a pause is set
			// (under CI's load, one left at once). The schedule after a
			// pause is checked once every process knows of it.
			for i, q := range qs {
				for deadline := time.Now().Add(5 * time.Second); ; {
					if d, _ := q.PausedFor(context.Background(), "k"); d > 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("quota %d never heard of the pause", i)
					}
					time.Sleep(time.Millisecond)
				}
			}
			_, deps = round()
			check("after the pause", before.Add(pause), deps)
		})
	}
}
