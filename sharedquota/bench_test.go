package sharedquota

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/headway-go/headway"
	"github.com/redis/go-redis/v9"
)

// BenchmarkDecision measures shared decisions per second and their latency
// on loopback, side by side with go-redis/redis_rate doing the same GCRA
// (one limit, one unit, one key) against the same Redis. Run with
//
//	go test -run '^$' -bench Decision -benchtime 2s -count 3 ./sharedquota/
func BenchmarkDecision(b *testing.B) {
	addr := redisAddr(b)
	c := newClient(b, addr)
	// One µs per unit, a second of burst: at the rates measured here no
	// decision waits, and both sides write their state on every call.
	// (At 1<<30 a second, redis_rate's TAT, in float seconds since 2017,
	// cannot move by one interval: it skips its SET and decides nothing.)
	const rate = 1_000_000
	warmUp(b, c)
	b.Run("sharedquota", func(b *testing.B) {
		q := NewRedis(c, WithPrefix(testPrefix(b)), WithTimeout(time.Second))
		defer q.Close()
		lim := []headway.Limit{headway.PerSecond(rate).WithBurst(rate)}
		benchLatency(b, func(ctx context.Context) error {
			_, err := q.Reserve(ctx, "k", lim, 1, forever)
			return err
		})
	})
	b.Run("redis_rate", func(b *testing.B) {
		l := redis_rate.NewLimiter(c)
		lim := redis_rate.Limit{Rate: rate, Burst: rate, Period: time.Second}
		key := testPrefix(b)
		benchLatency(b, func(ctx context.Context) error {
			_, err := l.Allow(ctx, key, lim)
			return err
		})
	})
}

// warmUp fills the client's pool before the first sub-benchmark, so that
// neither side pays for dialling.
func warmUp(b *testing.B, c *redis.Client) {
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 100 {
				if err := c.Ping(context.Background()).Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// benchLatency runs op in parallel and reports decisions per second and
// the p50 and p99 latency.
func benchLatency(b *testing.B, op func(context.Context) error) {
	ctx := context.Background()
	var mu sync.Mutex
	var all []time.Duration
	b.ReportAllocs()
	b.SetParallelism(4)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		lat := make([]time.Duration, 0, 1024)
		for pb.Next() {
			t0 := time.Now()
			if err := op(ctx); err != nil {
				b.Error(err)
				return
			}
			lat = append(lat, time.Since(t0))
		}
		mu.Lock()
		all = append(all, lat...)
		mu.Unlock()
	})
	el := time.Since(start)
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/el.Seconds(), "decisions/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkLease500 runs three lease-mode quotas at 500 requests a second
// in all and reports Redis round trips per request.
func BenchmarkLease500(b *testing.B) {
	for range b.N {
		trips, reqs, _ := runLease(b, 500, 10, 10, 2*time.Second)
		b.ReportMetric(float64(trips)/float64(reqs), "trips/req")
		b.ReportMetric(float64(reqs)/2, "req/s")
	}
}

// BenchmarkTransportRoundTrips measures what the README quotes: Redis
// round trips per request, through headway's Transport (pause checks and
// heartbeats included, not Reserve alone), for three processes (three
// Transports, each with its own quota and client) sending 500 requests a
// second in all, with leases of 10, for 3 seconds. Run with
//
//	go test -run '^$' -bench TransportRoundTrips -benchtime 1x ./sharedquota/
func BenchmarkTransportRoundTrips(b *testing.B) {
	for _, lease := range []int{0, 10} {
		b.Run("lease="+strconv.Itoa(lease), func(b *testing.B) {
			for range b.N {
				trips, reqs := runTransports(b, 500, 10, lease, 3*time.Second)
				b.ReportMetric(float64(trips)/float64(max(reqs, 1)), "trips/req")
				b.ReportMetric(float64(reqs)/3, "req/s")
			}
		})
	}
}

// runTransports runs 3 Transports sharing one quota of rate a second
// (burst burst) through quotas with leases of lease slots, 8 goroutines
// each, for dur, and returns Redis round trips and requests sent.
func runTransports(tb testing.TB, rate, burst, lease int, dur time.Duration) (trips, reqs int64) {
	addr := redisAddr(tb)
	prefix := testPrefix(tb)
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var sent atomic.Int64
	var wg sync.WaitGroup
	qs := make([]*Redis, 3)
	for i := range qs {
		qs[i] = NewRedis(newClient(tb, addr), WithPrefix(prefix), WithLease(lease))
		tr := headway.New(srv.Client().Transport,
			headway.WithLimit(headway.PerSecond(rate).WithBurst(burst)),
			headway.WithKey(func(*http.Request) string { return "k" }),
			headway.WithSharedQuota(qs[i]))
		for range 8 {
			wg.Go(func() {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
					resp, err := tr.RoundTrip(req)
					if err != nil {
						continue
					}
					resp.Body.Close()
					sent.Add(1)
				}
			})
		}
	}
	wg.Wait()
	for _, q := range qs {
		q.Close()
		trips += q.Stats().RoundTrips
	}
	return trips, sent.Load()
}
