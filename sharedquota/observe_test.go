package sharedquota

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/internal/metrictest"
	"github.com/redis/go-redis/v9"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestFallbacksAreCountedAndLogged reserves against a Redis that is not
// there: every reservation falls back, the degraded counter says so, and
// the fall is logged once, at Info, without the key.
func TestFallbacksAreCountedAndLogged(t *testing.T) {
	mp := metrictest.NewProvider()
	var buf lockedBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
	defer c.Close()
	q := NewRedis(c, WithMeterProvider(mp), WithLogger(log), WithHeartbeat(time.Hour))
	defer q.Close()

	const key = "api.test\x00Bearer SECRET"
	for range 3 {
		if _, err := q.Reserve(context.Background(), key, []headway.Limit{headway.PerSecond(100)}, 1, forever); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int64{}
	for _, m := range mp.Collect(context.Background()) {
		if m.Kind == metrictest.Sum && len(m.Points) == 1 {
			got[m.Name] = int64(m.Points[0].Value)
		}
	}
	if got["headway.sharedquota.degraded"] != 3 || got["headway.sharedquota.reservations"] != 3 {
		t.Errorf("metrics %v, want 3 reservations, all degraded", got)
	}
	// The fall may be logged by the heartbeat's first round, which runs
	// beside the reservations and may have marked Redis down (so that they
	// fell back) and not yet written its record: Close waits for it.
	q.Close()
	out := buf.String()
	if n := strings.Count(out, "Redis unavailable"); n != 1 || !strings.Contains(out, "mode=fallback") {
		t.Errorf("log:\n%s\nwant one record of the fall, with its mode", out)
	}
	if strings.Contains(out, "SECRET") {
		t.Error("the log shows the key")
	}
}

// TestLogsOncePerChange: a state that lasts is logged when it begins and
// when it ends, never once per call. The set of processes holding a value
// of another type (someone SET it) is logged once however many heartbeats
// meet it, and once more when it is usable again; so is a key's hash of
// another type, however many retries meet it.
func TestLogsOncePerChange(t *testing.T) {
	c := newClient(t, redisAddr(t))
	var buf lockedBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	q := NewRedis(c, WithPrefix(testPrefix(t)), WithTimeout(slowTimeout), WithLogger(log),
		WithHeartbeat(10*time.Millisecond), WithRetryInterval(10*time.Millisecond))
	defer q.Close()
	ctx := context.Background()
	count := func(msg string) int { return strings.Count(buf.String(), msg) }
	const (
		procsBad  = "the processes cannot be counted"
		procsGood = "the processes are counted again"
		keyBad    = "a key's hash in Redis is unusable"
		keyGood   = "a key's hash in Redis is usable again"
	)
	_, procs := q.KeyNames("k")
	for round := 1; round <= 2; round++ {
		if err := c.Set(ctx, procs, "not a set", 0).Err(); err != nil {
			t.Fatal(err)
		}
		errs := q.Stats().Errors
		waitFor(t, 10*time.Second, func() bool { return q.Stats().Errors >= errs+10 }) // ten heartbeats met it
		if n := count(procsBad); n != round {
			t.Fatalf("round %d: %d records of the processes not counted, want %d:\n%s", round, n, round, buf.String())
		}
		if err := c.Del(ctx, procs).Err(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, func() bool { return count(procsGood) == round })
		trips := q.Stats().RoundTrips
		waitFor(t, 10*time.Second, func() bool { return q.Stats().RoundTrips >= trips+10 })
		if n, m := count(procsBad), count(procsGood); n != round || m != round {
			t.Fatalf("round %d: %d and %d records of the processes lost and counted again, want %d each", round, n, m, round)
		}
	}

	bad, _ := q.KeyNames("bad")
	if err := c.Set(ctx, bad, "not a hash", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	lim := headway.PerSecond(1000).WithBurst(1000)
	errs := q.Stats().Errors
	for q.Stats().Errors < errs+5 { // five tries of the key's hash met it
		reserve(t, q, "bad", 1, lim)
		time.Sleep(5 * time.Millisecond)
	}
	if n := count(keyBad); n != 1 {
		t.Fatalf("%d records of the key's hash unusable, want 1", n)
	}
	if err := c.Del(ctx, bad).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool {
		before := q.Stats().Degraded
		reserve(t, q, "bad", 1, lim)
		return q.Stats().Degraded == before
	})
	for range 5 {
		reserve(t, q, "bad", 1, lim)
	}
	if n, m := count(keyBad), count(keyGood); n != 1 || m != 1 {
		t.Fatalf("%d and %d records of the key's hash unusable and usable again, want 1 each:\n%s", n, m, buf.String())
	}
}
