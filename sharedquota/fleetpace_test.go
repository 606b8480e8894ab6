package sharedquota

import (
	"context"
	"crypto/sha1"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/headway-go/headway/fakeserver"
	"github.com/headway-go/headway/ratelimitheader"
	"github.com/redis/go-redis/v9"
)

// bareThrottle is what a Transport passes to Learn after a 429 that says
// nothing else.
var bareThrottle = ratelimitheader.Signal{Throttled: true}

// hashInt reads an integer field of q's hash for key; -1 if absent.
func hashInt(t *testing.T, c *redis.Client, q *Redis, key, field string) int64 {
	t.Helper()
	name, _ := q.KeyNames(key)
	s, err := c.HGet(context.Background(), name, field).Result()
	if err == redis.Nil {
		return -1
	}
	n, perr := strconv.ParseInt(s, 10, 64)
	if err != nil || perr != nil {
		t.Fatalf("%s = %q: %v %v", field, s, err, perr)
	}
	return n
}

// TestABareThrottleCutsTheFleet (issue 10: with no limits, bare 429s): a
// bare throttle that one process learns paces every process's
// reservations without limits at once, a throttle of a request reserved
// before the cut changes nothing, and a later one measures what the
// fleet sent since the cut.
func TestABareThrottleCutsTheFleet(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	a := newQuota(t, c)
	b := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
	defer b.Close()
	ctx := context.Background()

	// Nothing learned: A's requests go unpaced (the first is the fleet's
	// probe, the second, A's again, ends it).
	for i := range 20 {
		if d := reserve(t, a, "k", 1); d != 0 {
			t.Fatalf("reservation %d with nothing learned waits %v", i, d)
		}
	}
	if err := a.Learn(ctx, "k", bareThrottle); err != nil {
		t.Fatal(err)
	}
	if s := hashInt(t, c, a, "k", "as"); s != 1 {
		t.Fatalf("after the first cut, slow start is %d, want 1", s)
	}
	// 20 sent within a second (measured over one at least): 20/s, then
	// 18/s doubling every second. B, which was told nothing, keeps to it:
	// its fifth leaves five intervals after the cut at the earliest (at
	// most 24/s in the first 0.4s), later only if B asks late.
	cut := time.Now()
	var last time.Duration
	for range 5 {
		last = reserve(t, b, "k", 1)
	}
	if at := time.Since(cut) + last; at < 5*time.Second/24-20*time.Millisecond || at > time.Second {
		t.Fatalf("B's fifth reservation leaves %v after the cut, want about five intervals at 18-24/s", at)
	}
	cutAt := hashInt(t, c, a, "k", "ac")

	// A throttle of one of A's 20, all sent before the cut, is stale.
	if err := a.Learn(ctx, "k", bareThrottle); err != nil {
		t.Fatal(err)
	}
	if at := hashInt(t, c, a, "k", "ac"); at != cutAt {
		t.Fatalf("a throttle of a request reserved before the cut cut again (%d, was %d)", at, cutAt)
	}

	// One of B's, sent after the cut, is not: it measures 5 sent (the
	// fifth throttled: 4.5 taken) since the cut, over the time since.
	time.Sleep(last + 50*time.Millisecond)
	if err := b.Learn(ctx, "k", bareThrottle); err != nil {
		t.Fatal(err)
	}
	if at := hashInt(t, c, a, "k", "ac"); at == cutAt {
		t.Fatal("a throttle of a request reserved after the cut did not cut")
	}
	if s := hashInt(t, c, a, "k", "as"); s != 0 {
		t.Fatalf("after the second cut, slow start is %d, want 0", s)
	}
	// (Within a second of the first cut; later, on a loaded machine, the
	// exit from slow start reckons with a bucket that overflowed.)
	cycle := float64(hashInt(t, c, a, "k", "ac")-cutAt) / 1e6
	if w, want := float64(hashInt(t, c, a, "k", "ar"))/1000, 4.5/cycle; cycle < 1 && (w > want*1.01 || w < want*0.8) {
		t.Fatalf("the rate at the second cut is %.2f/s, want what was sent since the first, %.2f/s", w, want)
	}
	if acn, an := hashInt(t, c, a, "k", "acn"), hashInt(t, c, a, "k", "an"); acn != an || an != 25 {
		t.Fatalf("counted %d reservations, %d at the cut; want 25 and 25", an, acn)
	}
}

// TestThrottlesIntoABlockDoNotCutTheFleet: a server that blocks a key for
// a while after a violation answers every request of the block with a
// bare 429, the fleet's probes into it included. Nothing goes through
// between those throttles, so they measure no rate: cut by them, the
// fleet's pace fell to the floor (0.5/s, against a server of 20/s) and
// stayed there long after the block (3 processes sent 28 of 300 requests
// in a minute, where one alone sent 297). Only a throttle with requests
// that went through since the last cut cuts again.
func TestThrottlesIntoABlockDoNotCutTheFleet(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	a := newQuota(t, c)
	b := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
	defer b.Close()
	ctx := context.Background()
	for range 20 {
		reserve(t, a, "k", 1)
	}
	if err := a.Learn(ctx, "k", bareThrottle); err != nil {
		t.Fatal(err)
	}
	cutAt, rate := hashInt(t, c, a, "k", "ac"), hashInt(t, c, a, "k", "ar")
	// A block: each process's probe after the cut, a backoff apart (far
	// below the pace), is throttled in turn. Once the throttles in a row
	// last blockLeast, the pace is what the first burst let through a
	// second: the 19 of 20 the throttle did not refuse.
	for i, q := range []*Redis{b, a, b, a} {
		time.Sleep(reserve(t, q, "k", 1) + 300*time.Millisecond)
		if err := q.Learn(ctx, "k", bareThrottle); err != nil {
			t.Fatal(err)
		}
		if at, ar := hashInt(t, c, a, "k", "ac"), hashInt(t, c, a, "k", "ar"); at != cutAt || ar < rate-1000 || ar > rate {
			t.Fatalf("throttle %d into the block cut the pace to %.2f/s (was %.2f/s)", i+1, float64(ar)/1000, float64(rate)/1000)
		}
	}
	if am := hashInt(t, c, a, "k", "am"); am <= cutAt {
		t.Fatal("the throttles into the block did not start the measure again")
	}
	// After the block, requests go through; the next throttle measures
	// them, and cuts.
	var last time.Duration
	for range 6 {
		last = reserve(t, b, "k", 1)
	}
	time.Sleep(last + 20*time.Millisecond)
	if err := b.Learn(ctx, "k", bareThrottle); err != nil {
		t.Fatal(err)
	}
	if at := hashInt(t, c, a, "k", "ac"); at == cutAt {
		t.Fatal("a throttle after requests went through did not cut")
	}
	if n := hashInt(t, c, a, "k", "ab"); n != 0 {
		t.Fatalf("the cut left %d throttles of the block counted, want 0", n)
	}
	// Probes at the pace, all throttled (a pace too fast for a slow
	// server, not a block), do cut.
	cutAt = hashInt(t, c, a, "k", "ac")
	for range 3 {
		last = reserve(t, a, "k", 1)
	}
	time.Sleep(last + 5*time.Millisecond)
	for range 3 {
		if err := a.Learn(ctx, "k", bareThrottle); err != nil {
			t.Fatal(err)
		}
	}
	if at := hashInt(t, c, a, "k", "ac"); at == cutAt {
		t.Fatal("throttles of requests sent at the pace did not cut")
	}
}

// TestOneTryAProcessIntoABlockDoesNotCut: each process sends one try at a
// time into what it takes for a block, so a round of tries counts one
// reservation a process between two throttles. Such a round measures no
// rate either: cut by it, 3 processes whose answers stated what was left
// fell to the floor, a try each 2 s, and kept a block of 3 s going for
// good (200 requests: 14-94 answered in 40 s; now all of them in 17-27 s).
func TestOneTryAProcessIntoABlockDoesNotCut(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	a := newQuota(t, c, WithHeartbeat(50*time.Millisecond))
	b := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix), WithHeartbeat(50*time.Millisecond))
	defer b.Close()
	ctx := context.Background()
	for range 20 {
		reserve(t, a, "k", 1)
	}
	reserve(t, b, "k", 1)
	for deadline := time.Now().Add(5 * time.Second); a.Live("k") < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a counts %d processes, want 2", a.Live("k"))
		}
	}
	if err := a.Learn(ctx, "k", bareThrottle); err != nil {
		t.Fatal(err)
	}
	cutAt, rate := hashInt(t, c, a, "k", "ac"), hashInt(t, c, a, "k", "ar")
	for round := range 3 {
		// b's try, then a's, each after its slot; a's answer comes first.
		time.Sleep(reserve(t, b, "k", 1))
		time.Sleep(reserve(t, a, "k", 1) + 20*time.Millisecond)
		for _, q := range []*Redis{a, b} {
			if err := q.Learn(ctx, "k", bareThrottle); err != nil {
				t.Fatal(err)
			}
		}
		if at, ar := hashInt(t, c, a, "k", "ac"), hashInt(t, c, a, "k", "ar"); at != cutAt || ar != rate {
			t.Fatalf("round %d of a try a process cut the pace to %.2f/s (was %.2f/s)", round+1, float64(ar)/1000, float64(rate)/1000)
		}
		if n := hashInt(t, c, a, "k", "ab"); n != int64(round+1) {
			t.Fatalf("after round %d the backoff counts %d rounds", round+1, n)
		}
	}
}

// TestACutMakesBookedRequestsReserveAgain: the requests a process booked
// at the old pace, due after it heard of a cut another process made, are
// told once, as they are about to leave, to reserve again; those booked
// after the cut are not.
func TestACutMakesBookedRequestsReserveAgain(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	a := newQuota(t, c)
	b := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
	defer b.Close()
	ctx := context.Background()
	waitFor(t, 5*time.Second, func() bool { return a.subscribed(a.now()) && b.subscribed(b.now()) })

	reserve(t, b, "k", 1) // B's probe
	reserve(t, b, "k", 1)
	if err := b.Learn(ctx, "k", bareThrottle); err != nil { // 2/s at most: 1.8/s
		t.Fatal(err)
	}
	// B books three slots at 1.8/s, A three after them. (A throttle
	// after one reservation a process or fewer measures nothing: see
	// TestOneTryAProcessIntoABlockDoesNotCut.)
	reserve(t, b, "k", 1)
	reserve(t, b, "k", 1)
	d := reserve(t, b, "k", 1)
	for range 3 {
		reserve(t, a, "k", 1)
	}
	var booked []int64 // when A's three leave, as A noted them
	ks := a.state("k")
	ks.mu.Lock()
	for _, d := range ks.deps {
		if d.seq != 0 {
			booked = append(booked, d.at)
		}
	}
	ks.mu.Unlock()
	if len(booked) != 3 {
		t.Fatalf("A noted %d reservations, want 3", len(booked))
	}
	time.Sleep(d)
	if err := b.Learn(ctx, "k", bareThrottle); err != nil { // B's second, sent after the cut
		t.Fatal(err)
	}
	acn := hashInt(t, c, a, "k", "acn")
	waitFor(t, 5*time.Second, func() bool { // published: A hears of it
		ks.mu.Lock()
		defer ks.mu.Unlock()
		return ks.cutSeq == acn
	})
	told := 0
	for i, at := range booked {
		if at <= ks.cutAt {
			continue // gone already (a loaded machine)
		}
		if !ks.recut(at) {
			t.Fatalf("booked slot %d, due after the cut, is not told to reserve again", i)
		}
		if ks.recut(at) {
			t.Fatalf("booked slot %d is told twice", i)
		}
		told++
	}
	if told < 2 {
		t.Fatalf("%d of A's slots were still booked when the cut came; want the test to check some", told)
	}
	after := a.now() + int64(reserve(t, a, "k", 1))
	if ks.recut(after) {
		t.Fatal("a slot booked after the cut is told to reserve again")
	}
}

// TestTheFleetProbes: with nothing learned, the fleet's first request goes
// alone; another process's requests are held (nothing spent, asked again
// within 15ms) until the probe's process reserves again, its answer in.
func TestTheFleetProbes(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	a := newQuota(t, c)
	b := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
	defer b.Close()
	if d := reserve(t, a, "k", 1); d != 0 {
		t.Fatalf("the probe waits %v", d)
	}
	d := reserve(t, b, "k", 1)
	if d <= 0 || d > 15*time.Millisecond {
		t.Fatalf("a request of another process while the probe is out waits %v, want a recheck within 15ms", d)
	}
	if an := hashInt(t, c, a, "k", "an"); an != 1 {
		t.Fatalf("counted %d, want the probe alone", an)
	}
	ks := b.state("k")
	ks.mu.Lock()
	if len(ks.held) != 1 {
		ks.mu.Unlock()
		t.Fatalf("B noted %d held reservations, want 1", len(ks.held))
	}
	due := ks.held[0] // when the held request asks again, as B noted it
	ks.mu.Unlock()
	if !ks.unhold(due) {
		t.Fatal("the held request is not told to reserve again")
	}
	if ks.unhold(due) {
		t.Fatal("the held request is told twice")
	}
	reserve(t, a, "k", 1) // the probe's answer came
	for i := range 3 {
		if d := reserve(t, b, "k", 1); d != 0 {
			t.Fatalf("after the probe, B's reservation %d waits %v", i, d)
		}
	}

	// A probe whose process does not come back holds the others for a
	// second at most.
	reserve(t, a, "k2", 1)
	start := time.Now()
	for reserve(t, b, "k2", 1) != 0 {
		if time.Since(start) > 3*time.Second {
			t.Fatal("held for more than 3s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if el := time.Since(start); el < 800*time.Millisecond {
		t.Fatalf("released after %v, before the probe's second", el)
	}
}

// TestTheFleetPaceOutlivesRedis: while Redis is away, a key without limits
// keeps to the pace the fleet learned, shared among the processes, not
// unpaced.
func TestTheFleetPaceOutlivesRedis(t *testing.T) {
	srv := startRedis(t)
	c := newKillableClient(t, srv.addr())
	q := NewRedis(c, WithPrefix(testPrefix(t)), WithHeartbeat(time.Hour), WithTimeout(slowTimeout))
	defer q.Close()
	ctx := context.Background()
	for range 5 {
		reserve(t, q, "k", 1)
	}
	if err := q.Learn(ctx, "k", bareThrottle); err != nil { // 5 in a second: 4.5/s
		t.Fatal(err)
	}
	reserve(t, q, "k", 1)
	// The process is counted (its first use of the key announced it, in
	// the background): else the fallback would divide the pace among the
	// 4 processes assumed when none were ever counted.
	waitFor(t, 10*time.Second, func() bool { return q.Live("k") == 1 })
	srv.kill()
	var at []time.Duration
	for range 3 {
		d, err := q.Reserve(ctx, "k", nil, 1, forever)
		if err != nil {
			t.Fatal(err)
		}
		at = append(at, d)
	}
	if s := q.Stats(); s.Degraded < 3 {
		t.Fatalf("stats %+v: want the three decided without Redis", s)
	}
	// The fleet's pace (4.5/s, a little faster since: slow start) shared
	// among the processes counted (this one): about 1/4.5 s apart.
	if gap := at[2] - at[1]; gap < 180*time.Millisecond || gap > 500*time.Millisecond {
		t.Fatalf("fallback slots %v: %v apart, want the learned pace", at, gap)
	}
	if err := q.Learn(ctx, "k", bareThrottle); err == nil {
		t.Fatal("Learn without Redis: no error, so the Transport would not cut its own pace")
	}
}

// TestAIMDCurve: the fleet's pace after a cut follows the curve of the
// root's AIMD: beta of the rate at the cut, doubling every second in slow
// start, else the cubic that is back at the rate after aimdK.
func TestAIMDCurve(t *testing.T) {
	c := newClient(t, redisAddr(t))
	curve := redis.NewScript(prelude + aimdLua + `
return aimdInterval(tonumber(ARGV[1]), now - tonumber(ARGV[2]), ARGV[3] == '1')
`)
	want := func(wmax float64, t float64, slow bool) float64 { // requests per second
		var r float64
		if slow {
			r = wmax * aimdBeta * math.Exp2(min(t, 60))
		} else {
			k := aimdK.Seconds()
			r = max(wmax*(1-aimdBeta)/(k*k*k)*math.Pow(t-k, 3)+wmax, wmax*aimdBeta)
		}
		return max(r, aimdFloorMilli/1000.0)
	}
	for _, tc := range []struct {
		wmax float64
		t    float64
		slow bool
	}{
		{10, 0, true}, {10, 1, true}, {10, 2.5, true}, {10, 0, false}, {10, 3, false}, {10, 12, false},
		{10, 20, false}, {0.5, 0, false}, {2000, 6, false}, {0.1, 1, true},
	} {
		v, err := curve.Run(context.Background(), c, []string{"x"}, int64(tc.wmax*1000), int64(tc.t*1e6), map[bool]string{true: "1", false: "0"}[tc.slow]).Int64()
		if err != nil {
			t.Fatal(err)
		}
		got := 1e6 / float64(v)
		if w := want(tc.wmax, tc.t, tc.slow); math.Abs(got-w) > w*0.01 {
			t.Errorf("rate %v at %vs (slow %v): Lua paces %.3f/s, Go %.3f/s", tc.wmax, tc.t, tc.slow, got, w)
		}
	}
	consts, err := redis.NewScript(prelude+aimdLua+`return {blockLeast, penClimb}`).Run(context.Background(), c, []string{"x"}).Int64Slice()
	if err != nil || len(consts) != 2 || consts[0] != int64(aimdBlockLeast/time.Microsecond) || consts[1] != aimdPenClimb {
		t.Errorf("Lua's blockLeast and penClimb are %v (%v), Go's %v and %v", consts, err, aimdBlockLeast, aimdPenClimb)
	}
}

// TestPoisonedFleetPace: whatever another program left in the fields of
// the fleet's pace and probe, a reservation without limits answers with
// a wait no longer than the cap, a bare throttle is learned, no call
// errs, and the hash keeps a bounded TTL.
func TestPoisonedFleetPace(t *testing.T) {
	c := newClient(t, redisAddr(t))
	ctx := context.Background()
	bad := []string{"9223372036854775807", "nan", "-nan", "inf", "-inf", "1e300", "-5", "abc", "", "1e15"}
	for _, field := range []string{"ar", "ac", "as", "at", "an", "a1", "acn", "po", "ph", "ao", "ak", "ap", "ay", "au", "ag", "ad", "ae", "ax", "aq"} {
		for _, v := range bad {
			name := field + "=" + v
			q := newQuota(t, c, WithHeartbeat(time.Hour))
			quota, _ := q.KeyNames("k")
			now, err := c.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			nowUs := now.UnixMicro()
			fields := map[string]any{
				"exp": nowUs + 2_000_000, "ar": 10_000, "ac": nowUs - 1_000_000, "as": "0", "at": nowUs,
				"an": 40, "a1": nowUs - 1_000_000, "acn": 30, "po": "other", "ph": nowUs + 500_000,
			}
			fields[field] = v
			if err := c.HSet(ctx, quota, fields).Err(); err != nil {
				t.Fatal(err)
			}
			c.PExpire(ctx, quota, 5*time.Second)
			for range 3 {
				d, err := q.Reserve(ctx, "k", nil, 1, forever)
				if err != nil || d < 0 || d > maxServerWait {
					t.Fatalf("%s: Reserve = %v, %v; want a wait from 0 to the cap", name, d, err)
				}
				if _, err := q.PausedFor(ctx, "k"); err != nil {
					t.Fatalf("%s: PausedFor: %v", name, err)
				}
			}
			if err := q.Learn(ctx, "k", bareThrottle); err != nil {
				t.Fatalf("%s: Learn: %v", name, err)
			}
			if d, err := q.Reserve(ctx, "k", nil, 1, forever); err != nil || d < 0 || d > 3*time.Second {
				t.Fatalf("%s: after a cut, Reserve = %v, %v; want within the slowest pace", name, d, err)
			}
			if s := q.Stats(); s.Errors != 0 || s.Degraded != 0 {
				t.Fatalf("%s: stats %+v, want no errors and nothing degraded", name, s)
			}
			ttl, err := c.PTTL(ctx, quota).Result()
			if err != nil || ttl <= 0 || ttl > maxServerWait+2*time.Minute {
				t.Fatalf("%s: TTL %v (%v), want a bounded one", name, ttl, err)
			}
			q.Close()
			c.Del(ctx, quota)
		}
	}
}

// TestAFleetGetsPastABlock: a server that blocks a key for a second after
// a violation, and starts the block again with every request that comes
// during it, answering all of them with bare 429s. Three processes that
// share their pace must keep away from it together for longer than the
// block, then go on at the pace they had: cut by every throttle into the
// block, their pace fell to the floor, 0.5/s against a server of 20/s, and
// stayed there (28 of 300 requests in a minute; one process alone sent
// 297 in a minute). See TestThrottlesIntoABlockDoNotCutTheFleet.
func TestAFleetGetsPastABlock(t *testing.T) {
	if testing.Short() {
		t.Skip("a fleet of 3 processes for some seconds")
	}
	// Counts, not times: at the floor, 150 requests take 5 minutes and the
	// run ends at one, with most of them failed (their waits outlive it).
	fleetPastBlock(t, fakeserver.Config{Limit: 20, Window: time.Second, Burst: 10, Dialect: fakeserver.Bare{},
		Penalty: fakeserver.Penalty{Block: time.Second, Extend: true, BlockStates: fakeserver.StateNothing}})
}

// fleetPastBlock runs 3 processes of 4 workers, no limits configured,
// sharing, through 150 requests against a fake server of cfg, for a
// minute at most, and fails t unless all but 10 at most were answered 200
// with no error. It returns the server's counts.
func fleetPastBlock(t *testing.T, cfg fakeserver.Config) fakeserver.Stats {
	t.Helper()
	fs, err := fakeserver.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	const n = 150
	res := runFleet(t, 3, workerConfig{
		Redis: redisAddr(t), URL: fs.URL, Prefix: testPrefix(t),
		Goroutines: 4, NoLimit: true, Requests: n / 3,
		Timeout: 2 * time.Second,
		Start:   time.Now().Add(2 * time.Second), Duration: 60 * time.Second,
	})
	var ok, errs int64
	for i, r := range res {
		t.Logf("worker %d: %d ok, %d 429, %d errors; %+v", i, r.OK, r.TooMany, r.Errors, r.Stats)
		ok, errs = ok+r.OK, errs+r.Errors
	}
	st := fs.Server.Stats()
	t.Logf("server: %d admitted, %d rejected, %d blocked", st.Admitted, st.Rejected, st.Blocked)
	if errs > 0 || ok < n-10 {
		t.Errorf("%d of %d requests answered 200, %d errors, in a minute; the fleet did not get past the block", ok, n, errs)
	}
	return st
}

// TestAFleetThatReadsItsQuotaGetsPastABlock is TestAFleetGetsPastABlock
// against servers whose answers state what is left, and no policy: each
// process paces by its own model of the server, which sees the others'
// requests only as quota gone. A throttle is then the fleet's overrun, and
// it cuts the fleet's pace as a bare one does; without that, 3 processes
// overran again after each block, and a block each request restarts never
// ended: 150 requests took 32-58 s, 26-60 of them sent into blocks (now
// 15-25 s, 0-5 into blocks).
func TestAFleetThatReadsItsQuotaGetsPastABlock(t *testing.T) {
	if testing.Short() {
		t.Skip("fleets of 3 processes for some seconds")
	}
	redisAddr(t) // before the subtests: one skip, or one failure in CI
	for _, c := range []struct {
		name    string
		dialect fakeserver.Dialect
		states  fakeserver.BlockStatement
	}{
		{"x-ratelimit, block's end", fakeserver.XRateLimit{}, fakeserver.StateBlockEnd},
		{"github, block's end", fakeserver.GitHub{}, fakeserver.StateBlockEnd},
		{"openai, window's wait", fakeserver.OpenAI{}, fakeserver.StateWindow},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// Counts, not times: the run ends at a minute either way.
			st := fleetPastBlock(t, fakeserver.Config{Limit: 20, Window: time.Second, Burst: 10, Dialect: c.dialect,
				Penalty: fakeserver.Penalty{Block: 3 * time.Second, Extend: true, BlockStates: c.states}})
			// 0-5 sent into a block, measured; 26-60 without the cut.
			if st.Blocked > 15 {
				t.Errorf("the fleet sent %d requests into blocks; it overran again after each", st.Blocked)
			}
		})
	}
}

// slowCut delays the cut script on its way to Redis by d.
type slowCut struct{ d time.Duration }

func (slowCut) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h slowCut) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) > 1 {
			s, _ := args[1].(string)
			if args[0] == "eval" {
				s = fmt.Sprintf("%x", sha1.Sum([]byte(s)))
			}
			if (args[0] == "evalsha" || args[0] == "eval") && s == cutScript.Hash() {
				time.Sleep(h.d)
			}
		}
		return next(ctx, cmd)
	}
}
func (slowCut) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAThrottledProcessHoldsItsQueue: a process that met a bare throttle
// holds its own reservations without limits until Redis has taken the
// throttle in: one made meanwhile waits for the cut, and leaves at the
// pace after it, not at once into the block the throttle may have begun
// (the first burst's requests that reserved while the throttle was on its
// way went into the block, some 10 of a fleet's).
func TestAThrottledProcessHoldsItsQueue(t *testing.T) {
	c := newClient(t, redisAddr(t))
	c.AddHook(slowCut{100 * time.Millisecond})
	ctx := context.Background()
	q := newQuota(t, c, WithHeartbeat(time.Hour), WithTimeout(time.Second))
	for range 10 {
		if d, err := q.Reserve(ctx, "k", nil, 1, forever); err != nil || d != 0 {
			t.Fatalf("the first burst: %v, %v", d, err)
		}
	}
	learnt := make(chan error, 1)
	go func() { learnt <- q.Learn(ctx, "k", bareThrottle) }()
	time.Sleep(30 * time.Millisecond) // the throttle is on its way
	d, err := q.Reserve(ctx, "k", nil, 1, forever)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-learnt; err != nil {
		t.Fatal(err)
	}
	if d < 20*time.Millisecond {
		t.Errorf("reserved while the throttle was on its way: a wait of %v, want one at the pace after the cut", d)
	}
}
