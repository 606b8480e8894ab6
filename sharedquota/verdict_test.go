package sharedquota

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestAVerdictIsHeardByTheFleet: one process tells the fleet that a key's
// overloads are a limit's; another hears it, from memory, with no round
// trip; a verdict taken back is heard too; the record in Redis expires
// with the verdict.
func TestAVerdictIsHeardByTheFleet(t *testing.T) {
	addr := redisAddr(t)
	a := newQuota(t, newClient(t, addr))
	b := newQuota(t, newClient(t, addr), WithPrefix(a.cfg.prefix))
	ctx := context.Background()
	waitFor(t, 10*time.Second, func() bool { return a.sub.since.Load() != 0 && b.sub.since.Load() != 0 })
	b.state("k") // b uses the key: it listens to its verdicts
	if d := b.HeardLimit("k"); d > 0 {
		t.Fatalf("a verdict before any was told: %v", d)
	}
	if err := a.TellLimit(ctx, "k", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if d := a.HeardLimit("k"); d <= 9*time.Minute || d > 10*time.Minute {
		t.Fatalf("the teller's own verdict: %v left, want about 10 minutes", d)
	}
	waitFor(t, 10*time.Second, func() bool { return b.HeardLimit("k") > 9*time.Minute })
	trips := b.Stats().RoundTrips
	if b.HeardLimit("k"); b.Stats().RoundTrips != trips {
		t.Fatal("HeardLimit made a round trip")
	}
	vk := verdictKey(a.state("k").hashKey)
	if ttl := a.c.(*redis.Client).PTTL(ctx, vk).Val(); ttl <= 9*time.Minute || ttl > 10*time.Minute {
		t.Fatalf("the verdict's record has a TTL of %v: want the verdict's span", ttl)
	}
	if err := b.TellLimit(ctx, "k", 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return a.HeardLimit("k") <= 0 })
	if n := a.c.(*redis.Client).Exists(ctx, vk).Val(); n != 0 {
		t.Fatal("the verdict's record outlived its taking back")
	}
	// Longer than an hour is told for an hour.
	if err := a.TellLimit(ctx, "k", 1000*time.Hour); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { d := b.HeardLimit("k"); return d > 59*time.Minute && d <= time.Hour })
}

// TestAVerdictIsValidated: a published verdict out of bounds, or not a
// number, is not heard; the script refuses a span out of bounds.
func TestAVerdictIsValidated(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	q := newQuota(t, c)
	ctx := context.Background()
	waitFor(t, 10*time.Second, func() bool { return q.sub.since.Load() != 0 })
	hash := q.state("k").hashKey
	for _, bad := range []string{"-5", "3600000001", "99999999999999999999", "nan", "1e9", ""} {
		c.Publish(ctx, q.channel, "v "+hash+" "+bad)
	}
	// A good one after them: once it is heard, the bad ones were read.
	c.Publish(ctx, q.channel, "v "+hash+" 1000000")
	waitFor(t, 10*time.Second, func() bool { return q.HeardLimit("k") > 0 })
	if d := q.HeardLimit("k"); d > time.Second {
		t.Fatalf("heard a verdict of %v: a bad one was taken", d)
	}
	for _, bad := range []any{-1, int64(maxVerdict/time.Microsecond) + 1, "nan", 1.5} {
		_, err := verdictScript.Run(ctx, c, []string{verdictKey(hash)}, bad, int64(maxVerdict/time.Microsecond), q.channel, hash).Result()
		if err == nil {
			t.Errorf("the script took a span of %v", bad)
		}
	}
}
