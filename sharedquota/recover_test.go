package sharedquota

import (
	"context"
	"testing"
	"time"

	"github.com/headway-go/headway"
)

// TestRecoversWithTheDefaultClient: with a client configured as the
// README shows (go-redis's own retries and dialing), a Redis killed for a
// few seconds and restarted empty on the same address is shared again by
// itself, the pause subscription included, without a restart.
func TestRecoversWithTheDefaultClient(t *testing.T) {
	srv := startRedis(t)
	a := NewRedis(newClient(t, srv.addr()), WithPrefix(testPrefix(t)))
	defer a.Close()
	b := NewRedis(newClient(t, srv.addr()), WithPrefix(a.cfg.prefix))
	defer b.Close()
	lim := headway.PerSecond(1000).WithBurst(1000)
	ctx := context.Background()
	reserve(t, b, "k", 1, lim) // b knows the key: it hears of its pauses
	waitFor(t, 10*time.Second, func() bool {
		_, err := a.Reserve(ctx, "k", []headway.Limit{lim}, 1, forever)
		return err == nil && a.sub.since.Load() != 0 && b.sub.since.Load() != 0 && a.Stats().Degraded == 0
	})
	srv.kill()
	end := time.Now().Add(3 * time.Second)
	for time.Now().Before(end) {
		start := time.Now()
		if _, err := a.Reserve(ctx, "k", []headway.Limit{lim}, 1, time.Second); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("a reservation with Redis gone took %v", took)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if a.Stats().Degraded == 0 {
		t.Fatal("no reservation fell back")
	}
	srv.restart(t)
	waitFor(t, 10*time.Second, func() bool {
		before := a.Stats().Degraded
		_, err := a.Reserve(ctx, "k", []headway.Limit{lim}, 1, time.Second)
		return err == nil && a.Stats().Degraded == before
	})
	waitFor(t, 10*time.Second, func() bool { return b.sub.since.Load() != 0 })
	if err := a.Pause(ctx, "k", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() bool { return b.state("k").pausedFor(b.now()) > 0 })
}
