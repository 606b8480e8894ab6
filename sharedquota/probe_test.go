package sharedquota

import (
	"context"
	"testing"
	"time"

	"github.com/headway-go/headway"
	"github.com/redis/go-redis/v9"
)

// TestAProbeAnsweredByOneKeyEndsTheFall: the call that tries Redis again
// after it went away may be one whose key's hash is unusable (WRONGTYPE).
// Redis answered it: Redis is back, and the other keys are shared again.
// (The probe's turn used to stay taken: every key of the process stayed in
// fallback, and the heartbeat never tried again, until a restart.)
func TestAProbeAnsweredByOneKeyEndsTheFall(t *testing.T) {
	srv := startRedis(t)
	q := newQuota(t, newKillableClient(t, srv.addr()), WithHeartbeat(time.Hour), WithRetryInterval(50*time.Millisecond))
	ctx := context.Background()
	lim := headway.PerSecond(1000).WithBurst(1000)
	reserve(t, q, "good", 1, lim)
	reserve(t, q, "bad", 1, lim)

	srv.kill()
	reserve(t, q, "good", 1, lim) // falls back: Redis is marked down
	if !q.health.isDown() {
		t.Fatal("Redis killed, yet not marked down")
	}
	srv.restart(t)
	bad, _ := q.KeyNames("bad")
	if err := newClient(t, srv.addr()).Set(ctx, bad, "not a hash", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	// The bad key's reservation is the one that tries Redis again.
	waitFor(t, 10*time.Second, func() bool {
		before := q.Stats().RoundTrips
		reserve(t, q, "bad", 1, lim)
		return q.Stats().RoundTrips != before
	})
	waitFor(t, 5*time.Second, func() bool {
		before := q.Stats().Degraded
		reserve(t, q, "good", 1, lim)
		return q.Stats().Degraded == before
	})
}

// TestAKeyProbeThatFindsRedisGoneTriesAgain: a key whose hash was
// unusable tries it again after the retry interval; when that call finds
// Redis itself gone, the key tries again once Redis is back and its hash
// repaired. (The key's turn to try used to stay taken: it stayed in
// fallback until a restart, its hash long repaired.)
func TestAKeyProbeThatFindsRedisGoneTriesAgain(t *testing.T) {
	srv := startRedis(t)
	q := newQuota(t, newKillableClient(t, srv.addr()), WithHeartbeat(time.Hour), WithRetryInterval(50*time.Millisecond))
	ctx := context.Background()
	lim := headway.PerSecond(1000).WithBurst(1000)
	bad, _ := q.KeyNames("bad")
	admin := newClient(t, srv.addr())
	if err := admin.Set(ctx, bad, "not a hash", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	reserve(t, q, "bad", 1, lim) // WRONGTYPE: the key alone falls back
	if q.health.isDown() {
		t.Fatal("a WRONGTYPE marked Redis down")
	}
	srv.kill()
	time.Sleep(100 * time.Millisecond) // the key's retry interval passes
	reserve(t, q, "bad", 1, lim)       // its try finds Redis gone
	if !q.health.isDown() {
		t.Fatal("Redis killed, yet not marked down")
	}
	srv.restart(t) // empty: the bad value is gone
	waitFor(t, 10*time.Second, func() bool {
		before := q.Stats().Degraded
		reserve(t, q, "bad", 1, lim)
		return q.Stats().Degraded == before
	})
}

// TestABadReplyLeavesNoTurnTaken: a call that tried Redis again and got a
// reply of the wrong shape leaves the turn to try free, for Redis and for
// its key: Redis answered, so the next call asks it.
func TestABadReplyLeavesNoTurnTaken(t *testing.T) {
	q := NewRedis(newClient(t, "127.0.0.1:1"), WithPrefix(testPrefix(t)), WithHeartbeat(time.Hour), WithRetryInterval(time.Millisecond))
	defer q.Close()
	ks := q.state("k")
	bad := &ReplyError{Script: "reserve", Reason: "test"}
	for _, h := range []*health{&q.health, &ks.health} {
		h.down(q.now()-1, bad) // down, its retry due
		if err := q.usable(ks); err != nil {
			t.Fatalf("the retry due: %v", err)
		}
		q.failed(context.Background(), ks, bad)
		if err := q.usable(ks); err != nil {
			t.Fatalf("after a bad reply to the retry, the next call may not ask Redis: %v", err)
		}
		q.health.up()
		ks.health.up()
	}
}

// TestLeasedSlotsGoWithAPauseAskedFor: a process that learns of a pause by
// asking Redis (PausedFor, as through a Ring, or while its subscription is
// broken) drops its leased slots, as it does when it hears of the pause:
// the requests held by the pause reserve again one slot apart, not all at
// its end. (They used to keep their leased slots, each moved to the
// pause's end: a lease's worth of requests left at once as it ended.)
func TestLeasedSlotsGoWithAPauseAskedFor(t *testing.T) {
	addr := redisAddr(t)
	newRing := func() *redis.Ring {
		r := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": addr}, ContextTimeoutEnabled: true})
		t.Cleanup(func() { r.Close() })
		return r
	}
	a := newQuota(t, newRing(), WithHeartbeat(time.Hour))
	b := newQuota(t, newRing(), WithPrefix(a.cfg.prefix), WithLease(10), WithHeartbeat(time.Hour))
	ctx := context.Background()
	lim := headway.Every(time.Second)
	if d := reserve(t, b, "k", 1, lim); d != 0 {
		t.Fatalf("b's first reservation waits %v", d)
	}
	// Four requests of b hold leased slots 1s to 4s apart.
	for i := 1; i <= 4; i++ {
		if d := reserve(t, b, "k", 1, lim); !near(d, time.Duration(i)*time.Second) {
			t.Fatalf("b's reservation %d waits %v", i, d)
		}
	}
	// A pause past the slots b still holds (5s to 9s).
	if err := a.Pause(ctx, "k", 9*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * pauseCoalesce)
	// Each of the four, awake at its slot, finds the key paused and
	// reserves again, as a Transport does.
	var waits []time.Duration
	for range 4 {
		p, err := b.PausedFor(ctx, "k")
		if err != nil || p <= 0 {
			t.Fatalf("PausedFor: %v, %v", p, err)
		}
		waits = append(waits, reserve(t, b, "k", 1, lim))
	}
	for i := 1; i < len(waits); i++ {
		if waits[i]-waits[i-1] < time.Second-nearSlack {
			t.Fatalf("after the pause, b's held requests wait %v: more than one (the burst) in a slot", waits)
		}
	}
}
