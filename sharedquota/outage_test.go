package sharedquota

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
	"github.com/redis/go-redis/v9"
)

// fleetOutage is what a fleet of Transports did through one outage.
type fleetOutage struct {
	into, total        int64         // requests that reached the server during the outage; in all
	ok, failed         int           // answers the callers got
	elapsed, resume    time.Duration // from the first request to the last answer; from the outage's end to the first success after it
	roundTrips, during int64         // Redis round trips: in all; during the outage
	sends              []string      // the attempts sent during the outage: process and time
}

// runFleetOutage sends n GETs from procs Transports, each with workers
// goroutines, its own http.Transport, its own go-redis client and its own
// quota (shared through Redis at addr when shared), at 100 a second in
// all, into a server that fails in shape for 3 s from 1 s on: the outage
// scenario of the bench module, split over a fleet.
func runFleetOutage(tb testing.TB, addr string, shape fakeserver.OutageShape, procs, workers, n int, shared, probes bool) fleetOutage {
	tb.Helper()
	const rate, burst = 100, 10
	var (
		mu       sync.Mutex
		resumed  time.Time
		from, to time.Time
		downTo   time.Time
		res      fleetOutage
	)
	fs, err := fakeserver.Start(fakeserver.Config{
		Limit: rate, Window: time.Second, Burst: burst,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			now := time.Now()
			mu.Lock()
			if resumed.IsZero() && !downTo.IsZero() && !now.Before(downTo) {
				resumed = now
			}
			mu.Unlock()
			io.WriteString(w, "{}")
		}),
		Faults: fakeserver.Faults{Outage: shape, Latency: 5 * time.Millisecond, Jitter: 5 * time.Millisecond, Seed: 1},
	})
	if err != nil {
		tb.Fatal(err)
	}
	defer fs.Close()
	prefix := testPrefix(tb)
	var quotas []*Redis
	clients := make([]*http.Client, procs)
	for i := range clients {
		opts := []headway.Option{
			headway.WithLimit(headway.PerSecond(rate).WithBurst(burst - 1)),
			headway.WithRetry(headway.RetryOptions{MaxAttempts: 30, Statuses: []int{429, 500, 502, 503, 504}}),
		}
		if shared {
			c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
			defer c.Close()
			q := NewRedis(c, WithPrefix(prefix), WithTimeout(time.Second))
			defer q.Close()
			quotas = append(quotas, q)
			var sq headway.SharedQuota = q
			if !probes {
				sq = quotaOnly{r: q}
			}
			opts = append(opts, headway.WithSharedQuota(sq))
		}
		base := &http.Transport{ResponseHeaderTimeout: 200 * time.Millisecond, MaxIdleConnsPerHost: 2 * workers}
		defer base.CloseIdleConnections()
		id := i
		logged := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			now := time.Now()
			mu.Lock()
			if !from.IsZero() && !now.Before(from) && now.Before(downTo) {
				res.sends = append(res.sends, fmt.Sprintf("p%d@%dms", id, now.Sub(from).Milliseconds()))
			}
			mu.Unlock()
			return base.RoundTrip(req)
		})
		clients[i] = &http.Client{Transport: headway.New(logged, opts...)}
	}
	trips := func() (s int64) {
		for _, q := range quotas {
			s += q.Stats().RoundTrips
		}
		return s
	}
	start := time.Now()
	mu.Lock()
	from, to = start.Add(time.Second), start.Add(4*time.Second)
	downTo = to
	mu.Unlock()
	fs.Server.SetOutage(from, to)
	var (
		next     atomic.Int64
		last     time.Time
		wg       sync.WaitGroup
		tripsAt0 atomic.Int64
		tripsAt1 atomic.Int64
	)
	time.AfterFunc(time.Until(from), func() { tripsAt0.Store(trips()) })
	time.AfterFunc(time.Until(to), func() { tripsAt1.Store(trips()) })
	for _, c := range clients {
		for range workers {
			wg.Go(func() {
				for next.Add(1) <= int64(n) {
					resp, err := c.Get(fs.URL + "/items")
					ok := err == nil && resp.StatusCode == http.StatusOK
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					mu.Lock()
					if ok {
						res.ok++
					} else {
						res.failed++
					}
					last = time.Now()
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	st := fs.Server.Stats()
	mu.Lock()
	defer mu.Unlock()
	res.into, res.total = st.Outage, st.Total
	res.elapsed = last.Sub(start)
	if !resumed.IsZero() {
		res.resume = resumed.Sub(to)
	}
	res.roundTrips, res.during = trips(), tripsAt1.Load()-tripsAt0.Load()
	return res
}

// BenchmarkFleetOutage runs the outage of issue 11 (600 GETs, 8 workers,
// 100/s, the server fails for 3 s) through 4 Transports that share their
// quota, and their probes, through Redis, each with its own go-redis
// client: real time, over loopback, some 8 s per shape.
func BenchmarkFleetOutage(b *testing.B) {
	addr := redisAddr(b)
	for _, sh := range []struct {
		name  string
		shape fakeserver.OutageShape
	}{{"500s", fakeserver.OutageError}, {"resets", fakeserver.OutageReset}, {"hangs", fakeserver.OutageHang}} {
		b.Run(sh.name, func(b *testing.B) {
			for range b.N {
				r := runFleetOutage(b, addr, sh.shape, 4, 2, 600, true, !*noProbes)
				b.ReportMetric(float64(r.into), "into-outage")
				b.ReportMetric(float64(r.failed), "failed")
				b.ReportMetric(r.elapsed.Seconds(), "s")
				b.ReportMetric(float64(r.resume.Milliseconds()), "resume-ms")
				b.ReportMetric(float64(r.roundTrips), "redis-trips")
				b.ReportMetric(float64(r.during), "redis-trips-in-outage")
				b.Logf("%s: %d into the outage: %v", sh.name, r.into, r.sends)
			}
		})
	}
}

var noProbes = flag.Bool("no-shared-probes", false, "BenchmarkFleetOutage: share the quota, not the probes")

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// quotaOnly is a shared quota without its probes: what a fleet did before
// it shared them.
type quotaOnly struct{ r *Redis }

func (q quotaOnly) Reserve(ctx context.Context, key string, limits []headway.Limit, cost int, within time.Duration) (time.Duration, error) {
	return q.r.Reserve(ctx, key, limits, cost, within)
}

func (q quotaOnly) Pause(ctx context.Context, key string, d time.Duration) error {
	return q.r.Pause(ctx, key, d)
}

// TestProbeTurnIsShared: a host one quota reports down is down for the
// others as soon as the report is published; only one of them gets the
// turn to probe once it is due; a failed probe of the holder puts the next
// one out, a report of another changes nothing; and a success anywhere ends
// it for all.
func TestProbeTurnIsShared(t *testing.T) {
	addr := redisAddr(t)
	a := newQuota(t, newClient(t, addr))
	b := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix), WithHeartbeat(time.Hour))
	defer b.Close()
	ctx := context.Background()
	waitFor(t, 10*time.Second, func() bool { return a.sub.since.Load() != 0 && b.sub.since.Load() != 0 })
	b.state("k") // b uses the key: it listens to its outages
	// Using a key first makes b announce itself, once, in the background:
	// the round trips of b counted below must be its calls alone.
	waitFor(t, 10*time.Second, func() bool { return b.live.Load() != 0 })
	if down, _ := b.HostState("k"); down {
		t.Fatal("down before any report")
	}
	w, err := a.HostDown(ctx, "k", 20*time.Millisecond, 40*time.Millisecond)
	if err != nil || w != 20*time.Millisecond {
		t.Fatalf("HostDown: %v, %v; want the first probe 20 ms on", w, err)
	}
	waitFor(t, 10*time.Second, func() bool { down, _ := b.HostState("k"); return down })
	// A second report, not from the holder of a turn, changes nothing.
	if w2, err := b.HostDown(ctx, "k", time.Second, time.Second); err != nil || w2 > w {
		t.Fatalf("a second HostDown moved the next probe: %v → %v, %v", w, w2, err)
	}
	var turnA, turnB time.Duration
	waitFor(t, 10*time.Second, func() bool {
		turnA, err = a.ProbeTurn(ctx, "k")
		return err == nil && turnA == 0
	})
	if turnB, err = b.ProbeTurn(ctx, "k"); err != nil || turnB <= 0 || turnB > probeLease {
		t.Fatalf("b got the turn a holds: %v, %v", turnB, err)
	}
	// b knows a holds the turn: it asks Redis no more until it ends.
	trips := b.Stats().RoundTrips
	if turnB, err = b.ProbeTurn(ctx, "k"); err != nil || turnB <= 0 || b.Stats().RoundTrips != trips {
		t.Fatalf("b asked again while a held the turn: %v, %v, %d round trips", turnB, err, b.Stats().RoundTrips-trips)
	}
	ok := outageKey(a.state("k").hashKey)
	if ttl := a.c.(*redis.Client).PTTL(ctx, ok).Val(); ttl <= 0 || ttl > probeLease+2*time.Second {
		t.Fatalf("the outage record's TTL is %v: want one bounded by the turn and the margin", ttl)
	}
	// The holder's probe failed: the next one is twice the interval from
	// now.
	if w, err = a.HostDown(ctx, "k", 20*time.Millisecond, 40*time.Millisecond); err != nil || w != 40*time.Millisecond {
		t.Fatalf("HostDown of the holder: %v, %v; want the next probe 40 ms on", w, err)
	}
	// b hears the turn is over: it waits for the next probe or, if that
	// came due before b asked, takes the turn itself; a then waits.
	var w2 time.Duration
	waitFor(t, 10*time.Second, func() bool {
		w2, err = b.ProbeTurn(ctx, "k")
		return err == nil && w2 <= w
	})
	if w2 == 0 {
		if turnA, err = a.ProbeTurn(ctx, "k"); err != nil || turnA <= 0 {
			t.Fatalf("a got the turn b holds: %v, %v", turnA, err)
		}
	}
	if err := b.HostUp(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { down, _ := a.HostState("k"); return !down })
	if n := a.c.(*redis.Client).Exists(ctx, ok).Val(); n != 0 {
		t.Fatal("the outage record outlived the host's return")
	}
	if w, err := a.ProbeTurn(ctx, "k"); err != nil || w != 0 {
		t.Fatalf("ProbeTurn with no outage on: %v, %v", w, err)
	}
}

// TestAStallGivesWayToTheFirstFailure: a stall, reported with the time it
// may last, holds the fleet; a failure reported before any turn is given
// brings the first probe forward, to its own first interval; once a turn
// is given, reports of others change nothing.
func TestAStallGivesWayToTheFirstFailure(t *testing.T) {
	addr := redisAddr(t)
	a := newQuota(t, newClient(t, addr))
	b := newQuota(t, newClient(t, addr), WithPrefix(a.cfg.prefix))
	ctx := context.Background()
	w, err := a.HostDown(ctx, "k", 5*time.Second, 40*time.Millisecond)
	if err != nil || w != 5*time.Second {
		t.Fatalf("a stall's report: %v, %v; want the first probe when it may end, 5 s on", w, err)
	}
	// A report that asks for a later first probe changes nothing.
	if w2, err := b.HostDown(ctx, "k", 10*time.Second, 40*time.Millisecond); err != nil || w2 > w {
		t.Fatalf("a later first probe: %v, %v; want at most %v", w2, err, w)
	}
	// b's request failed: the first probe comes 20 ms after it.
	if w, err = b.HostDown(ctx, "k", 20*time.Millisecond, 40*time.Millisecond); err != nil || w != 20*time.Millisecond {
		t.Fatalf("the first failure: %v, %v; want the first probe 20 ms on", w, err)
	}
	waitFor(t, 10*time.Second, func() bool {
		turn, err := a.ProbeTurn(ctx, "k")
		return err == nil && turn == 0
	})
	// a holds the turn: b's reports, however early they ask, change
	// nothing; a's failed probe doubles the interval.
	if w2, err := b.HostDown(ctx, "k", time.Millisecond, 40*time.Millisecond); err != nil || w2 != 0 {
		t.Fatalf("a report of another while a holds the turn: %v, %v; want the probe due (0)", w2, err)
	}
	if w, err = a.HostDown(ctx, "k", 20*time.Millisecond, 40*time.Millisecond); err != nil || w != 40*time.Millisecond {
		t.Fatalf("the holder's failed probe: %v, %v; want the next 40 ms on", w, err)
	}
	if w2, err := b.HostDown(ctx, "k", time.Millisecond, 40*time.Millisecond); err != nil || w2 > w {
		t.Fatalf("a report of another after a turn was given: %v, %v; want at most %v", w2, err, w)
	}
}

// TestOutageRecordIsValidated: whatever another program left in the
// outage record reads as no outage, and the next report writes it anew,
// within bounds.
func TestOutageRecordIsValidated(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	q := newQuota(t, c)
	ctx := context.Background()
	ok := outageKey(q.state("k").hashKey)
	for _, bad := range [][]string{
		{"next", "nan", "iv", "1000"},
		{"next", "inf", "iv", "1000"},
		{"next", "-5", "iv", "1000"},
		{"next", "99999999999999999999", "iv", "1000"},
		{"next", "1", "iv", "-inf"},
		{"next", "1", "iv", "text"},
	} {
		c.Del(ctx, ok)
		c.HSet(ctx, ok, bad[0], bad[1], bad[2], bad[3], "own", "x", "ou", "nan")
		if w, err := q.ProbeTurn(ctx, "k"); err != nil || w != 0 {
			t.Errorf("%v: ProbeTurn = %v, %v; want no outage", bad, w, err)
		}
		w, err := q.HostDown(ctx, "k", 100*time.Millisecond, 200*time.Millisecond)
		if err != nil || w != 100*time.Millisecond {
			t.Errorf("%v: HostDown = %v, %v; want a new outage, its first probe in 100 ms", bad, w, err)
		}
		if ttl := c.PTTL(ctx, ok).Val(); ttl <= 0 || ttl > 125*time.Millisecond+2*time.Second {
			t.Errorf("%v: TTL %v", bad, ttl)
		}
	}
}

// TestIdleKeysForgetTheirOutageState: the outage state a key's host had
// in this process (made as soon as the Transport asks HostState) goes with
// the key when the heartbeat forgets it idle: keys come and go, and the
// outage states must not stay behind, one for every key ever used.
func TestIdleKeysForgetTheirOutageState(t *testing.T) {
	c := newClient(t, redisAddr(t))
	q := newQuota(t, c)
	const n = 100
	for i := range n {
		key := fmt.Sprint("key ", i)
		q.state(key)
		if down, _ := q.HostState(key); down {
			t.Fatalf("%s is down", key)
		}
	}
	if _, err := q.HostDown(context.Background(), "key 0", time.Second, time.Second); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	for _, ks := range q.keys {
		ks.lastUsed.Store(q.now() - 2*int64(q.idleAfter())) // idle for long
	}
	q.mu.Unlock()
	q.beat()
	q.mu.Lock()
	keys := len(q.keys)
	q.mu.Unlock()
	q.outs.mu.Lock()
	outs := len(q.outs.m)
	q.outs.mu.Unlock()
	if keys != 0 || outs != 0 {
		t.Errorf("after every key went idle: %d keys, %d outage states held; want none", keys, outs)
	}
}
