package sharedquota

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/headway-go/headway"
	"github.com/redis/go-redis/v9"
)

// TestWrongTypeFailsOneKeyAlone: a key whose hash holds a value of another
// type falls back alone; the other keys of the process stay shared. (Issue
// 10, item 5: one WRONGTYPE marked Redis unavailable, and 200 of 200
// reservations on a healthy key went without it.)
func TestWrongTypeFailsOneKeyAlone(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	q := newQuota(t, c)
	ctx := context.Background()
	bad, _ := q.KeyNames("bad")
	if err := c.Set(ctx, bad, "not a hash", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	lim := headway.PerSecond(1000).WithBurst(1000)
	for _, limits := range [][]headway.Limit{{lim}, {lim, headway.PerSecond(2000)}} {
		for range 3 {
			if _, err := q.Reserve(ctx, "bad", limits, 1, forever); err != nil {
				t.Fatalf("the bad key, under Fallback: %v", err)
			}
		}
		before := q.Stats()
		for range 200 {
			reserve(t, q, "good", 1, limits...)
		}
		if s := q.Stats(); s.Degraded != before.Degraded {
			t.Fatalf("%d of 200 reservations on a healthy key went without Redis", s.Degraded-before.Degraded)
		}
		if s := q.Stats(); s.Degraded == 0 {
			t.Fatal("the bad key's reservations were not degraded")
		}
		if err := q.Pause(ctx, "good", time.Millisecond); err != nil {
			t.Fatalf("Pause on the healthy key: %v", err)
		}
		// The bad key is left alone for the retry interval, then tried
		// again: once its hash is repaired, it is shared again.
		if err := c.Del(ctx, bad).Err(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, func() bool {
			before := q.Stats().Degraded
			reserve(t, q, "bad", 1, limits...)
			return q.Stats().Degraded == before
		})
		c.Set(ctx, bad, "not a hash", time.Minute)
	}
	// FailClosed reports the bad key's error as unavailability of that key.
	fc := newQuota(t, c, WithFailureMode(FailClosed), WithPrefix(q.cfg.prefix))
	_, err := fc.Reserve(ctx, "bad", []headway.Limit{lim}, 1, forever)
	var re redis.Error
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &re) {
		t.Fatalf("FailClosed on the bad key: %v", err)
	}
	if _, err := fc.Reserve(ctx, "good", []headway.Limit{lim}, 1, forever); err != nil {
		t.Fatalf("FailClosed on a healthy key: %v", err)
	}
}
