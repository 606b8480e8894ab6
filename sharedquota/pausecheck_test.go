package sharedquota

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/headway-go/headway"
	"github.com/redis/go-redis/v9"
)

// TestPauseHoldsReservedRequests: process B reserved its shared slots
// before process A sets a pause; the requests of B still sleeping on their
// slots must wait for the pause's end too, not leave during it. Its times
// are a few hundred milliseconds apart, so that a loaded machine cannot
// move one event past another.
func TestPauseHoldsReservedRequests(t *testing.T) {
	addr := redisAddr(t)
	a := newQuota(t, newClient(t, addr))
	b := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
	defer b.Close()

	var mu sync.Mutex
	var arrived []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived = append(arrived, time.Now())
		mu.Unlock()
	}))
	defer srv.Close()
	// One slot every 300ms, 3 at once: B's own pacer lets its three
	// requests go at once.
	const T = 300 * time.Millisecond
	lim := headway.Every(T).WithBurst(3)
	client := &http.Client{Transport: headway.New(srv.Client().Transport,
		headway.WithLimit(lim),
		headway.WithKey(func(*http.Request) string { return "k" }),
		headway.WithSharedQuota(b),
	)}
	// A reserves what B's Transport reserves, its limit with one request
	// of the burst held back (see headway.SharedQuota), so that the two
	// share one schedule.
	shared := headway.Every(T).WithBurst(2)
	// B's first request goes alone, to learn what the server says: the
	// key's first answer holds the others. Then A takes the shared slots
	// up to 0.9s: B's requests reserve the shared slots of 1.2s, 1.5s and
	// 1.8s and sleep on them.
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	arrived = nil
	mu.Unlock()
	for range 4 {
		reserve(t, a, "k", 1, shared)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		})
	}
	// Every request has reserved its slot (at once) and none has left
	// (the first slot is at 1.2s) when A pauses the key for 1.5s.
	time.Sleep(600 * time.Millisecond)
	called := time.Now()
	if err := a.Pause(context.Background(), "k", 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()
	t.Logf("Pause took %v", pausedAt.Sub(called).Round(time.Millisecond))
	wg.Wait()
	// The pause began between called and pausedAt.
	pauseFrom, pauseTo := pausedAt, called.Add(1500*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for _, at := range arrived {
		t.Logf("arrived %v after the pause began", at.Sub(called).Round(time.Millisecond))
		if at.Before(called) {
			// Its shared slot was after the pause began: it did not
			// wait for it, and the test proves nothing.
			t.Errorf("a request arrived %v before the pause began, before its shared slot", called.Sub(at).Round(time.Millisecond))
		}
		if at.After(pauseFrom) && at.Before(pauseTo) {
			t.Errorf("a request arrived %v after the pause began, before its end", at.Sub(called).Round(time.Millisecond))
		}
	}
	// Held by the pause, they reserved again, in turn in the shared
	// schedule: at most its burst (2) at once, then one slot apart (less
	// what a loaded machine may delay one arrival by), never all three as
	// the pause ends. How close the first two go depends on when the pause
	// ends: one slot apart if at the schedule's next free slot (2.1s), the
	// closer the later it ends (a loaded machine runs the test's Pause
	// late: the first two arrived 56ms apart once), together if a slot
	// later.
	for i := 2; i < len(arrived); i++ {
		if gap := arrived[i].Sub(arrived[i-2]); gap < T-150*time.Millisecond {
			t.Errorf("requests %d to %d arrived within %v after the pause: more than the shared burst (2) in a slot (%v)", i-2, i, gap, T)
		}
	}
	if len(arrived) != 3 {
		t.Errorf("%d requests arrived, want 3", len(arrived))
	}
	if s := b.Stats(); s.Errors != 0 || s.Degraded != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestPausePublished: a pause set by one process reaches the others
// through the quota's subscription, without their asking: PausedFor then
// answers from memory, with no round trip.
func TestPausePublished(t *testing.T) {
	addr := redisAddr(t)
	a := newQuota(t, newClient(t, addr))
	b := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix), WithHeartbeat(time.Hour))
	defer b.Close()
	ctx := context.Background()
	waitFor(t, 10*time.Second, func() bool { return b.sub.since.Load() != 0 })
	if p, err := b.PausedFor(ctx, "k"); err != nil || p != 0 {
		t.Fatalf("PausedFor before any pause: %v, %v", p, err)
	}
	waitFor(t, 10*time.Second, func() bool { return b.Live("k") >= 1 }) // the first heartbeat is done
	trips := b.Stats().RoundTrips
	if err := a.Pause(ctx, "k", 3*time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return b.state("k").pausedFor(b.now()) > 0 })
	if p, err := b.PausedFor(ctx, "k"); err != nil || !near(p, 3*time.Second) {
		t.Fatalf("PausedFor after the pause was published: %v, %v", p, err)
	}
	if n := b.Stats().RoundTrips - trips; n != 0 {
		t.Fatalf("PausedFor made %d round trips while subscribed", n)
	}
}

// TestRingAsksForPauses: through a Ring, a pause is published on the shard
// of its key, which a subscription on another shard would miss: the quota
// does not trust a subscription there, and PausedFor asks Redis.
func TestRingAsksForPauses(t *testing.T) {
	a1, a2 := redisAddr(t), startRedis(t).addr()
	newRing := func() *redis.Ring {
		r := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": a1, "two": a2}, ContextTimeoutEnabled: true})
		t.Cleanup(func() { r.Close() })
		return r
	}
	a := newQuota(t, newRing())
	b := NewRedis(newRing(), WithPrefix(a.cfg.prefix), WithTimeout(slowTimeout))
	defer b.Close()
	ctx := context.Background()
	for i := range 8 { // keys on both shards
		key := "k" + strconv.Itoa(i)
		if _, err := b.PausedFor(ctx, key); err != nil {
			t.Fatal(err)
		}
		if err := a.Pause(ctx, key, 3*time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(pauseCoalesce)
		if p, err := b.PausedFor(ctx, key); err != nil || !near(p, 3*time.Second) {
			t.Fatalf("%s: b sees a pause of %v (%v), want 3s", key, p, err)
		}
	}
}
