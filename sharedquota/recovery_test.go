package sharedquota

import (
	"context"
	"testing"
	"time"

	"github.com/headway-go/headway"
)

// TestRecoveryReconciles: what a process spent and paused on its own while
// Redis was away is in Redis after its first reservation once Redis is
// back, even a Redis restarted empty: the other processes do not get a
// fresh burst on top of it, and they honour the pause. (Issue 10, item 3:
// recovery spiked to 324-340/s against 208 allowed.)
func TestRecoveryReconciles(t *testing.T) {
	srv := startRedis(t)
	opts := []Option{WithPrefix(testPrefix(t)), WithTimeout(slowTimeout), WithHeartbeat(50 * time.Millisecond), WithRetryInterval(100 * time.Millisecond)}
	a := NewRedis(newKillableClient(t, srv.addr()), opts...)
	defer a.Close()
	b := NewRedis(newKillableClient(t, srv.addr()), opts...)
	defer b.Close()
	lim := headway.Every(time.Second).WithBurst(4)
	timedReserve(t, a, lim)
	timedReserve(t, b, lim)
	waitFor(t, 10*time.Second, func() bool { return a.Live("k") == 2 && b.Live("k") == 2 })

	srv.kill()
	// a alone, 2 processes: one every 2s, burst 2, from empty: 2s, 4s, 6s.
	for i := range 3 {
		d, err := timedReserve(t, a, lim)
		if err != nil || d < time.Duration(2*i+1)*time.Second {
			t.Fatalf("fallback reservation %d: %v, %v; want about %ds", i, d, err, 2*i+2)
		}
	}
	if err := a.Pause(context.Background(), "p", 20*time.Second); err == nil {
		t.Fatal("Pause with Redis away did not fail")
	}
	if _, err := a.Reserve(context.Background(), "p", []headway.Limit{lim}, 1, time.Hour); err != nil {
		t.Fatal(err)
	}

	srv.restart(t) // empty
	waitFor(t, 10*time.Second, func() bool {
		before := a.Stats().Degraded
		timedReserve(t, a, lim)
		return a.Stats().Degraded == before
	})
	// a's fallback spent up to about 8s ahead: b, sharing again, waits
	// past it, not a fresh burst of 4.
	waitFor(t, 10*time.Second, func() bool { return !b.health.isDown() }) // b's heartbeat found Redis
	if d, _ := timedReserve(t, b, lim); d < 4*time.Second {
		t.Fatalf("after recovery, b waits %v: a fallback's departures were not recorded", d)
	}
	// a's pause, held alone while Redis was away, is shared once a
	// reservation of the key reaches Redis.
	if _, err := a.Reserve(context.Background(), "p", []headway.Limit{lim}, 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	if p, err := b.PausedFor(context.Background(), "p"); err != nil || p < 15*time.Second {
		t.Fatalf("after recovery, b sees a pause of %v (%v), want the one a held (20s)", p, err)
	}
	// a counts b again once a heartbeat of its own has seen b's: the
	// largest of a's last three looks may all predate b's return.
	waitFor(t, 10*time.Second, func() bool { return a.Live("k") == 2 })
}

// TestOneHeartbeatPerRound: a process using many keys announces itself in
// one call per round, not one per key, and closes at once. (Issue 10,
// item 9: 100k idle keys cost ~17,000 scripts a second and 19.5s to close.)
func TestOneHeartbeatPerRound(t *testing.T) {
	addr := redisAddr(t)
	a := newQuota(t, newClient(t, addr), WithHeartbeat(50*time.Millisecond))
	b := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix), WithHeartbeat(50*time.Millisecond))
	lim := headway.PerSecond(1000)
	for i := range 2000 {
		reserve(t, a, "key-"+string(rune('a'+i%26))+time.Duration(i).String(), 1, lim)
	}
	reserve(t, b, "key-a0s", 1, lim)
	before := a.Stats().RoundTrips
	start := time.Now()
	time.Sleep(500 * time.Millisecond)
	rounds := time.Since(start) / (50 * time.Millisecond)
	trips := a.Stats().RoundTrips - before
	t.Logf("%d keys: %d round trips in %d heartbeat rounds", 2000, trips, rounds)
	if trips > int64(rounds)+2 {
		t.Fatalf("%d round trips in %d rounds: more than one a round", trips, rounds)
	}
	waitFor(t, 10*time.Second, func() bool { return a.Live("key-a0s") == 2 && b.Live("key-a0s") == 2 })
	start = time.Now()
	b.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close took %v", took)
	}
	// Withdrawn: a counts one again once the last three looks agree.
	waitFor(t, 10*time.Second, func() bool { return a.Live("key-a0s") == 1 })
}

// TestFallbackStartsAfterTheSharedSchedule: a process that falls back
// starts after the latest slot any process booked (which every reply
// tells it), not after its own: the slots the others still hold are not
// sent beside. (Issue 10, item 3: entering fallback cost 2-4 throttles.)
func TestFallbackStartsAfterTheSharedSchedule(t *testing.T) {
	srv := startRedis(t)
	opts := []Option{WithPrefix(testPrefix(t)), WithTimeout(slowTimeout), WithHeartbeat(50 * time.Millisecond), WithFallbackProcesses(1)}
	a := NewRedis(newKillableClient(t, srv.addr()), opts...)
	defer a.Close()
	b := NewRedis(newKillableClient(t, srv.addr()), opts...)
	defer b.Close()
	lim := headway.Every(time.Second)
	timedReserve(t, a, lim) // a's slot: 0
	for range 5 {
		timedReserve(t, b, lim) // b's: 1s to 5s
	}
	// a asks for a slot it cannot wait for: nothing spent, but it learns
	// that the schedule is booked to 5s.
	if d, err := a.Reserve(context.Background(), "k", []headway.Limit{lim}, 1, 0); err != nil || d < 5*time.Second {
		t.Fatalf("refused reservation: %v, %v", d, err)
	}
	srv.kill()
	d, err := timedReserve(t, a, lim)
	if err != nil || a.Stats().Degraded != 1 {
		t.Fatalf("fallback: %v, %v, %+v", d, err, a.Stats())
	}
	// Booked to 5s; a alone (it counted 2 at most, 1 if the heartbeat has
	// not looked yet): its first fallback slot is one interval after.
	if d < 5500*time.Millisecond {
		t.Fatalf("the fallback's first slot is %v from now, inside the shared schedule (booked to 5s)", d)
	}
}

// TestFallbackStartsAfterWhatWasBookedSince: the shared schedule, booked
// ahead, grows as time passes: a process that falls back a second after it
// last heard how far it was booked starts its fallback that second later
// too, not among the slots the others booked meanwhile. (Issue 10, item 3:
// entering fallback cost a throttle in about half the runs of
// BenchmarkFleetFaults at server burst 10.)
func TestFallbackStartsAfterWhatWasBookedSince(t *testing.T) {
	srv := startRedis(t)
	opts := []Option{WithPrefix(testPrefix(t)), WithTimeout(slowTimeout), WithHeartbeat(time.Hour), WithFallbackProcesses(1)}
	a := NewRedis(newKillableClient(t, srv.addr()), opts...)
	defer a.Close()
	b := NewRedis(newKillableClient(t, srv.addr()), opts...)
	defer b.Close()
	lim := headway.Every(time.Second)
	timedReserve(t, a, lim)
	for range 5 {
		timedReserve(t, b, lim) // booked to 5s
	}
	if d, err := a.Reserve(context.Background(), "k", []headway.Limit{lim}, 1, 0); err != nil || d < 4500*time.Millisecond {
		t.Fatalf("refused reservation: %v, %v", d, err)
	}
	learned := time.Now()
	time.Sleep(time.Second)
	srv.kill()
	d, err := timedReserve(t, a, lim)
	if err != nil || a.Stats().Degraded != 1 {
		t.Fatalf("fallback: %v, %v, %+v", d, err, a.Stats())
	}
	// Booked to 5s from when a heard it, and a second more since: the
	// first fallback slot is one of a's intervals (the limit's, times the
	// processes counted) after that, measured from now.
	share := time.Duration(a.fallbackShare())
	if want := 5*time.Second + share*time.Second - time.Since(learned) + time.Second; d < want-300*time.Millisecond {
		t.Fatalf("the fallback's first slot is %v from now, want about %v: among what the others booked since", d, want)
	}
}
