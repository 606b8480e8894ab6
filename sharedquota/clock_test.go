package sharedquota

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/headway-go/headway"
	"github.com/redis/go-redis/v9"
)

// Redis's clock may go back under the state it holds (a failover to a
// replica whose clock is behind, an NTP step on its host), or forward.
// The tests below cannot move a redis-server's clock: they write the state
// that a Redis whose clock read ahead (or behind) of the present one would
// have written, which is what a Redis finds when its clock then steps the
// other way.

// clockJumps are how far the clock goes back in the tests: a step NTP
// makes, one past the minute of slack the checks allow, and one past
// anything a process writes ahead.
var clockJumps = []time.Duration{5 * time.Second, 2 * time.Minute, time.Hour}

// instantField matches the fields of a quota's hash, and of its outage's,
// that hold instants of Redis's clock: the pause, the expiry, the TATs
// (named by interval and burst), the learned policy's and the pace's, the
// cut's instant, the count's start, the fleet's probe, the high-water
// mark; the outage's next probe and the end of its turn.
var instantField = regexp.MustCompile(`^(pause|exp|lt|lu|at|ac|a1|ph|hw|next|nom|ou|\d+:\d+(:r)?)$`)

// shiftClock rewrites the hash key as a Redis whose clock read by ahead of
// the present one would have written it: every instant moved by ahead,
// and the key's expiry too (a Redis whose clock is then behind expires it
// later; one whose clock is ahead, sooner, or at once).
func shiftClock(t *testing.T, c *redis.Client, key string, by time.Duration) {
	t.Helper()
	ctx := context.Background()
	all, err := c.HGetAll(ctx, key).Result()
	if err != nil || len(all) == 0 {
		t.Fatalf("HGETALL %s: %v (%d fields)", key, err, len(all))
	}
	ttl, err := c.PTTL(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]any{}
	var exp int64
	for f, v := range all {
		n, err := strconv.ParseInt(v, 10, 64)
		if !instantField.MatchString(f) || err != nil || n <= 0 {
			continue
		}
		fields[f] = n + by.Microseconds()
		if f == "exp" {
			exp = n + by.Microseconds()
		}
	}
	if err := c.HSet(ctx, key, fields).Err(); err != nil {
		t.Fatal(err)
	}
	switch {
	case exp > 0:
		err = c.PExpireAt(ctx, key, time.UnixMicro(exp)).Err()
	case ttl > 0:
		err = c.PExpire(ctx, key, max(ttl+by, time.Millisecond)).Err()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestClockBackCostsABucket: after Redis's clock went back by X, the
// schedule a process booked is where it was, not X later: a process that
// never saw it waits for the slot after the booked ones (2s), through the
// lean script or the general one, and the process that booked it for the
// next one; none waits X. (The scripts read every TAT up to the cap and a
// minute ahead as valid: a jump back of 5s or 2 min stalled the quota that
// long.)
func TestClockBackCostsABucket(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	lim := headway.Every(time.Second).WithBurst(2) // field "1000000:2"
	for i, x := range clockJumps {
		key := "tat" + strconv.Itoa(i)
		a := newQuota(t, c)
		quota, _ := a.KeyNames(key)
		for range 3 {
			reserve(t, a, key, 1, lim) // slots at 0, 0, 1s: booked to 1s
		}
		shiftClock(t, c, quota, x)

		fresh := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
		if d := reserve(t, fresh, key, 1, lim); !near(d, 2*time.Second) {
			t.Fatalf("clock back %v: a new process's slot is %v from now, want 2s", x, d)
		}
		// The general script (two limits) reads the same TAT.
		if d := reserve(t, fresh, key, 1, lim, headway.PerSecond(1000)); !near(d, 3*time.Second) {
			t.Fatalf("clock back %v: the general script's slot is %v from now, want 3s", x, d)
		}
		if d := reserve(t, a, key, 1, lim); !near(d, 4*time.Second) {
			t.Fatalf("clock back %v: the booking process's next slot is %v from now, want 4s", x, d)
		}
		fresh.Close()
		// The hash expires as its state needs, in the clock Redis has now.
		if ttl := c.PTTL(context.Background(), quota).Val(); ttl <= 0 || ttl > 10*time.Second {
			t.Fatalf("clock back %v: TTL %v, want about the 4s the state needs and a margin", x, ttl)
		}
	}
}

// TestClockBackKeepsPauses: a pause of 3s set before Redis's clock went
// back by X holds every process for 3s, not 3s + X (the cap, for a long
// jump), and not 0 either (a pause further ahead than the checks allow
// used to read as none).
func TestClockBackKeepsPauses(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	ctx := context.Background()
	lim := headway.PerSecond(10)
	for i, x := range clockJumps {
		key := "pause" + strconv.Itoa(i)
		a := newQuota(t, c)
		quota, _ := a.KeyNames(key)
		if err := a.Pause(ctx, key, 3*time.Second); err != nil {
			t.Fatal(err)
		}
		shiftClock(t, c, quota, x)

		fresh := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
		if p, err := fresh.PausedFor(ctx, key); err != nil || !near(p, 3*time.Second) {
			t.Fatalf("clock back %v: a new process is paused %v (%v), want 3s", x, p, err)
		}
		if d := reserve(t, fresh, key, 1, lim); !near(d, 3*time.Second) {
			t.Fatalf("clock back %v: a new process's slot is %v from now, want 3s: after the pause", x, d)
		}
		// A shorter pause does not lengthen it; the other scripts read it
		// as the reservation did.
		if err := fresh.Pause(ctx, key, time.Second); err != nil {
			t.Fatal(err)
		}
		other := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
		if p, err := other.PausedFor(ctx, key); err != nil || !near(p, 3*time.Second) {
			t.Fatalf("clock back %v: after a shorter pause, a new process is paused %v (%v), want 3s", x, p, err)
		}
		fresh.Close()
		other.Close()
	}
}

// TestClockBackPausedForReadsOnly: the pause check, which writes nothing,
// reads a pause written before the clock went back as the time it had
// left, and leaves the hash as it was.
func TestClockBackPausedForReadsOnly(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	ctx := context.Background()
	a := newQuota(t, c)
	quota, _ := a.KeyNames("k")
	if err := a.Pause(ctx, "k", 3*time.Second); err != nil {
		t.Fatal(err)
	}
	shiftClock(t, c, quota, 2*time.Minute)
	before := c.HGetAll(ctx, quota).Val()
	fresh := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
	defer fresh.Close()
	if p, err := fresh.PausedFor(ctx, "k"); err != nil || !near(p, 3*time.Second) {
		t.Fatalf("paused %v (%v), want 3s", p, err)
	}
	if after := c.HGetAll(ctx, quota).Val(); after["pause"] != before["pause"] || after["hw"] != before["hw"] {
		t.Fatalf("PausedFor wrote the hash: %v, was %v", after, before)
	}
}

// TestClockBackProbes: an outage recorded before Redis's clock went back
// by X has its next probe one interval on at most, and a probe turn held
// ends within its second, not X later. (A turn read as X + 1s away failed
// the reply's checks: Redis counted as unavailable.)
func TestClockBackProbes(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	ctx := context.Background()
	for i, x := range clockJumps {
		key := "o" + strconv.Itoa(i)
		a := newQuota(t, c)
		quota, _ := a.KeyNames(key)
		outage := outageKey(quota)
		if _, err := a.HostDown(ctx, key, 200*time.Millisecond, 500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		shiftClock(t, c, outage, x)

		b := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
		w, err := b.ProbeTurn(ctx, key)
		if err != nil || w > 200*time.Millisecond {
			t.Fatalf("clock back %v: the next probe is %v away (%v), want 200ms at most", x, w, err)
		}
		for w > 0 {
			time.Sleep(w)
			if w, err = b.ProbeTurn(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
		if down, _ := b.HostState(key); !down {
			t.Fatalf("clock back %v: the outage was forgotten", x)
		}
		// b holds the turn for a second; then the clock goes back again.
		shiftClock(t, c, outage, x)
		o := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
		if w, err := o.ProbeTurn(ctx, key); err != nil || w <= 0 || w > probeLease {
			t.Fatalf("clock back %v: another process's turn is %v away (%v), want within the turn's second", x, w, err)
		}
		if s := o.Stats(); s.Errors != 0 || s.Degraded != 0 {
			t.Fatalf("clock back %v: stats %+v, want no errors", x, s)
		}
		b.Close()
		o.Close()
	}
}

// TestClockBackThroughTransport: through a Transport, a process that
// joins after Redis's clock went back by X sends its request within the
// fleet's schedule (booked half a second ahead), not X later.
func TestClockBackThroughTransport(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	// One request every 500ms, 2 at once: the fleet shares a burst of 1
	// (one request kept in reserve).
	lim := headway.Every(500 * time.Millisecond).WithBurst(2)
	transport := func(q *Redis) *http.Client {
		return &http.Client{Transport: headway.New(srv.Client().Transport,
			headway.WithLimit(lim),
			headway.WithKey(func(*http.Request) string { return "k" }),
			headway.WithSharedQuota(q),
		)}
	}
	get := func(client *http.Client) time.Duration {
		t.Helper()
		start := time.Now()
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return time.Since(start)
	}
	for _, x := range clockJumps {
		a := newQuota(t, c)
		quota, _ := a.KeyNames("k")
		ca := transport(a)
		for range 3 {
			get(ca) // at 0, 0.5s, 1s: the next slot is at 1.5s
		}
		shiftClock(t, c, quota, x)
		b := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
		if d := get(transport(b)); d > 2*time.Second {
			t.Fatalf("clock back %v: a new process's request took %v, want about 0.5s", x, d)
		}
		b.Close()
	}
}

// TestClockForwardKeepsKnownPauses: after Redis's clock went forward by
// 5s, a pause of 3s that it held looks over (its hash even expired), as
// it would after 5s of waiting. The processes that heard of it still hold
// it, and the first of them to reserve records it again, for every
// process. Buckets look full: a jump forward hands out one fresh burst.
func TestClockForwardKeepsKnownPauses(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	ctx := context.Background()
	lim := headway.PerSecond(10)
	a := newQuota(t, c)
	b := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
	defer b.Close()
	quota, _ := a.KeyNames("k")
	reserve(t, b, "k", 1, lim) // b knows the key: it hears of its pauses
	// Once subscribed: a pause published before would not reach b (on a
	// loaded machine, the subscription can take seconds).
	waitFor(t, 10*time.Second, func() bool { return b.sub.since.Load() != 0 })
	paused := time.Now()
	if err := a.Pause(ctx, "k", 3*time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return b.state("k").pausedFor(b.now()) > 0 })
	shiftClock(t, c, quota, -5*time.Second)
	// What is left of the pause, measured here: a loaded machine may have
	// spent some of it since.
	left := func() time.Duration { return 3*time.Second - time.Since(paused) - nearSlack }
	if want, d := left(), reserve(t, b, "k", 1, lim); d < want {
		t.Fatalf("after the clock went forward, b's slot is %v from now, within the pause of 3s (%v left)", d, want+nearSlack)
	}
	fresh := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
	defer fresh.Close()
	if want, d := left(), reserve(t, fresh, "k", 1, lim); d < want {
		t.Fatalf("after the clock went forward, a new process's slot is %v from now, within the pause of 3s (%v left)", d, want+nearSlack)
	}
}

// TestClockBackMovesEveryInstant: the first script to find Redis's clock
// behind the hash's high-water mark moves every instant of the hash back
// by the difference, the expiry included, and leaves the other fields
// (rates, bursts, counts, names) as they were.
func TestClockBackMovesEveryInstant(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	ctx := context.Background()
	q := newQuota(t, c)
	quota, _ := q.KeyNames("k")
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	x := 2 * time.Minute
	at := func(d time.Duration) int64 { return now.Add(x + d).UnixMicro() }
	instants := map[string]int64{
		"pause": at(time.Second), "exp": at(10 * time.Second), "1000000:2": at(500 * time.Millisecond),
		"500000:4:r": at(time.Second), "lt": at(300 * time.Millisecond), "lu": at(time.Minute),
		"at": at(200 * time.Millisecond), "ac": at(-time.Second), "a1": at(-5 * time.Second), "ph": at(800 * time.Millisecond),
	}
	others := map[string]string{"li": "1000000", "lb": "3", "ar": "5000", "as": "0", "an": "7", "acn": "2", "po": "p1"}
	fields := map[string]any{"hw": at(0)}
	for f, v := range instants {
		fields[f] = v
	}
	for f, v := range others {
		fields[f] = v
	}
	if err := c.HSet(ctx, quota, fields).Err(); err != nil {
		t.Fatal(err)
	}
	c.PExpireAt(ctx, quota, time.UnixMicro(instants["exp"]))
	if err := q.Pause(ctx, "k", time.Millisecond); err != nil { // pauseScript: it reads the hash first
		t.Fatal(err)
	}
	got := c.HGetAll(ctx, quota).Val()
	for f, v := range instants {
		n, err := strconv.ParseInt(got[f], 10, 64)
		// Moved back by the jump, less the time between the test's TIME
		// and the script's.
		if err != nil || n < v-x.Microseconds() || n > v-x.Microseconds()+time.Second.Microseconds() {
			t.Errorf("%s = %q, want %d less 2 min", f, got[f], v)
		}
	}
	for f, v := range others {
		if got[f] != v {
			t.Errorf("%s = %q, want %q as it was", f, got[f], v)
		}
	}
	if hw, _ := strconv.ParseInt(got["hw"], 10, 64); hw < now.UnixMicro() || hw > now.Add(time.Second).UnixMicro() {
		t.Errorf("hw = %q, want Redis's clock now, %d", got["hw"], now.UnixMicro())
	}
	if ttl := c.PTTL(ctx, quota).Val(); ttl <= 8*time.Second || ttl > 11*time.Second {
		t.Errorf("TTL %v, want the 10s the expiry says, not 2 min more", ttl)
	}
}
