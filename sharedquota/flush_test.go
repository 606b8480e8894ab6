package sharedquota

import (
	"context"
	"testing"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
	"github.com/headway-go/headway/ratelimitheader"
	"github.com/redis/go-redis/v9"
)

// TestForgottenStateIsRecordedAgain: a Redis emptied without a call
// failing (FLUSHALL, or a restart between two calls that go-redis's own
// retries hide) forgets the slots the fleet booked ahead and the pause it
// holds. A process that knew of them records them again with its next
// reservation, rather than taking a fresh burst beside the requests still
// sleeping on the slots booked before, or sending during the pause.
func TestForgottenStateIsRecordedAgain(t *testing.T) {
	srv := startRedis(t) // its own: FLUSHALL empties it
	c := newClient(t, srv.addr())
	a := newQuota(t, c)
	b := NewRedis(newClient(t, srv.addr()), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
	defer b.Close()
	ctx := context.Background()
	// between reports whether d, a wait reserved back to back with the
	// reservations it follows, is want: never much longer, and shorter
	// only by the time that passed since.
	between := func(d, want time.Duration) bool { return d >= want-nearSlack && d <= want+50*time.Millisecond }
	lim := headway.Every(time.Second)
	for range 3 {
		reserve(t, a, "k", 1, lim) // a's slots: 0, 1s, 2s
	}
	if d := reserve(t, b, "k", 1, lim); !near(d, 3*time.Second) { // b's: 3s
		t.Fatalf("b's slot: %v, want 3s", d)
	}
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if d := reserve(t, b, "k", 1, lim); !between(d, 4*time.Second) {
		t.Fatalf("after FLUSHALL, b's next slot is %v from now, want 4s: after the slots booked before", d)
	}
	if d := reserve(t, a, "k", 1, lim); !between(d, 5*time.Second) {
		t.Fatalf("after FLUSHALL, a's next slot is %v from now, want 5s", d)
	}

	// The same with leases: a's next lease starts after the slots of its
	// last one.
	leased := newQuota(t, c, WithLease(3))
	for i := range 3 {
		if d := reserve(t, leased, "l", 1, lim); !near(d, time.Duration(i)*time.Second) {
			t.Fatalf("leased slot %d: %v", i, d)
		}
	}
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if d := reserve(t, leased, "l", 1, lim); !between(d, 3*time.Second) {
		t.Fatalf("after FLUSHALL, the next lease's first slot is %v from now, want 3s: after the last lease's", d)
	}

	reserve(t, b, "p", 1, lim) // b knows the key "p": it hears of its pauses
	waitFor(t, 10*time.Second, func() bool { return b.sub.since.Load() != 0 })
	if err := a.Pause(ctx, "p", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() bool { return b.state("p").pausedFor(b.now()) > 0 })
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if d := reserve(t, b, "p", 1, lim); d < 5*time.Second-nearSlack {
		t.Fatalf("after FLUSHALL, b's next slot is %v from now, within the pause of 5s", d)
	}
	// Recorded again in Redis: a process that never heard of the pause
	// honours it too.
	fresh := NewRedis(newClient(t, srv.addr()), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
	defer fresh.Close()
	if d := reserve(t, fresh, "p", 1, lim); d < 5*time.Second-nearSlack {
		t.Fatalf("after FLUSHALL, a new process's slot is %v from now, within the pause of 5s", d)
	}
}

// TestForgottenPolicyIsSharedAgain: a policy a process shared, and Redis
// forgot (FLUSHALL), is shared again with the next response that states
// it, not half its life later: until then, the keys without limits of
// every process would go unpaced by it.
func TestForgottenPolicyIsSharedAgain(t *testing.T) {
	srv := startRedis(t) // its own: FLUSHALL empties it
	c := newClient(t, srv.addr())
	q := newQuota(t, c)
	ctx := context.Background()
	policy := ratelimitheader.Signal{Limit: 10, Period: 10 * time.Second}
	if err := q.Learn(ctx, "p", policy); err != nil {
		t.Fatal(err)
	}
	for range 9 {
		reserve(t, q, "p", 1)
	}
	if d := reserve(t, q, "p", 1); !near(d, time.Second) {
		t.Fatalf("past the learned burst: wait %v, want about 1s", d)
	}
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	reserve(t, q, "p", 1) // the fleet's probe: nothing learned in Redis
	if err := q.Learn(ctx, "p", policy); err != nil {
		t.Fatal(err)
	}
	quota, _ := q.KeyNames("p")
	if n, err := c.HExists(ctx, quota, "li").Result(); err != nil || !n {
		t.Fatalf("after FLUSHALL, the policy stated again is not in Redis (%v)", err)
	}
}

// TestFleetFlushAll runs TestFleetShares's fleet (3 processes × 16
// goroutines, one shared quota of 60 requests a second) and empties Redis
// with FLUSHALL halfway through: together the processes still send no more
// than one process may. Without the schedule recorded again, the slots
// booked before the flush (a request of each goroutine, some 0.8s ahead)
// went beside a fresh burst and a fresh schedule.
func TestFleetFlushAll(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3s run of 3 processes")
	}
	const (
		rate  = 60
		burst = 5
		dur   = 3 * time.Second
	)
	srv := startRedis(t) // its own: FLUSHALL empties it
	fs, err := fakeserver.Start(fakeserver.Config{Limit: 100, Window: time.Second, Burst: 40})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	start := time.Now().Add(2 * time.Second)
	flushed := make(chan error, 1)
	go func() {
		time.Sleep(time.Until(start.Add(dur / 2)))
		c := redis.NewClient(&redis.Options{Addr: srv.addr()})
		defer c.Close()
		flushed <- c.FlushAll(context.Background()).Err()
	}()
	res := runFleet(t, 3, workerConfig{
		Redis: srv.addr(), URL: fs.URL, Prefix: testPrefix(t),
		Rate: rate, Burst: burst, Goroutines: 16,
		Timeout: 2 * time.Second, // a slow Redis under load is still Redis
		Start:   start, Duration: dur,
	})
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	st, errs := fleetReport(t, fs, res, rate*dur.Seconds()+burst)
	if errs != 0 {
		t.Errorf("%d requests failed", errs)
	}
	sent := st.Admitted + st.Rejected
	if most := int64(rate*dur.Seconds()) + burst + 3; sent > most {
		t.Errorf("the fleet sent %d requests in %v, over the %d one process may", sent, dur, most)
	}
}
