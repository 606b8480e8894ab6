package sharedquota

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/internal/gcra"
	"github.com/redis/go-redis/v9"
)

// The GCRA is written twice: in Go (internal/gcra, which the Transport's
// pacer and this package's local fallback run) and in the Lua of
// reserveScript, reserveOneScript and pauseScript. TestGCRAAgreesWithLua
// holds the two to the same decisions: it runs one sequence of (time,
// cost, slots, within, pause) through internal/gcra and through the
// scripts on a real Redis, with their arguments built by the code that
// builds them for Reserve (no fallback floors, valid state: the scripts'
// repairs of bad values are tested apart), and compares every wait.
//
// The scripts read Redis's clock, which a test cannot set, so they run
// with their one `redis.call('TIME')` swapped for a read of a clock the
// test writes into the quota's hash (as TIME's two strings: seconds and
// microseconds); the rest of their text is the production text. The
// clock starts at Redis's own time and only moves forward, so the TTLs
// the scripts set stay in the future.

// withTestClock returns src reading its clock from two fields of KEYS[1].
func withTestClock(t *testing.T, src string) *redis.Script {
	t.Helper()
	const tm = "redis.call('TIME')"
	if n := strings.Count(src, tm); n != 1 {
		t.Fatalf("the script reads TIME %d times, want once:\n%s", n, src)
	}
	return redis.NewScript(strings.Replace(src, tm, "redis.call('HMGET', KEYS[1], 'test:s', 'test:us')", 1))
}

func TestGCRAAgreesWithLua(t *testing.T) {
	c := newClient(t, redisAddr(t))
	ctx := context.Background()
	reserve := withTestClock(t, reserveSrc)
	reserveOne := withTestClock(t, reserveOneSrc)
	pause := withTestClock(t, pauseSrc)
	prefix := testPrefix(t)
	const marginMs = 10 * 60 * 1000 // the TTLs outlast the test's clock
	q := newQuota(t, c)             // for its cap on waits and replies
	capUs, most := q.capUs(), q.maxReplyUs()

	cases := []struct {
		name   string
		limits []headway.Limit
		one    bool // through reserveOneScript (one limit, one slot)
	}{
		{"one limit", []headway.Limit{headway.PerSecond(5).WithBurst(2)}, true},
		{"one unweighted limit", []headway.Limit{headway.PerSecond(5).WithBurst(3).Requests()}, true},
		{"one limit, general script", []headway.Limit{headway.PerSecond(5).WithBurst(2)}, false},
		{"three limits", []headway.Limit{
			headway.PerSecond(10).WithBurst(4),
			headway.Per(120, time.Minute).WithBurst(30).Requests(),
			{Count: 7, Period: 3 * time.Second, Burst: 3},
		}, false},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := prefix + ":" + tc.name
			rt, err := c.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			now := rt.UnixMicro()
			bs := make(gcra.Buckets, len(tc.limits))
			for i, l := range tc.limits {
				bs[i] = gcra.Bucket{Interval: intervalUs(l), Burst: burstOf(l), Unweighted: l.Unweighted}
			}
			var (
				pauseUntil     int64
				ks             keyState
				spent, refused int
				rng            = rand.New(rand.NewPCG(uint64(ci), 13))
				withins        = []int64{0, 50_000, 200_000, 1_000_000, capUs}
				setClock       = func() {
					if err := c.HSet(ctx, key, "test:s", now/1_000_000, "test:us", now%1_000_000).Err(); err != nil {
						t.Fatal(err)
					}
				}
			)
			for step := range 400 {
				now += rng.Int64N(300_000) // up to 0.3 s later
				setClock()
				if rng.IntN(25) == 0 {
					p := rng.Int64N(2_000_000)
					pauseUntil = max(pauseUntil, now+min(p, capUs))
					v, err := pause.Run(ctx, c, []string{key}, p, marginMs, capUs, prefix+":pauses").Result()
					if err != nil {
						t.Fatal(err)
					}
					if v != pauseUntil-now {
						t.Fatalf("step %d: pause of %dµs: Lua says %v left, Go %d", step, p, v, pauseUntil-now)
					}
					continue
				}
				cost := 1 + rng.IntN(3)
				slots := 1
				if !tc.one && rng.IntN(3) == 0 {
					slots = 1 + rng.IntN(4)
				}
				within := withins[rng.IntN(len(withins))]

				// Go: slots reservations in a row, as the lease does.
				var want []int64
				for s := range slots {
					d := bs.Earliest(max(now, pauseUntil), 1, int64(cost))
					if d-now > within {
						if s == 0 {
							want = []int64{d - now}
							refused++
						}
						break
					}
					bs.Take(d, int64(cost))
					want = append(want, d-now)
					spent++
				}

				// Lua, with Reserve's arguments.
				var got []int64
				if tc.one {
					args := append(ks.oneArgsFor(tc.limits[0], cost, marginMs), within, capUs, 0, 0)
					v, err := reserveOne.Run(ctx, c, []string{key}, args...).Result()
					if err != nil {
						t.Fatal(err)
					}
					if got, _, err = reserveReply(nil, v, 1, most, capUs); err != nil {
						t.Fatal(err)
					}
				} else {
					args := argsFor(tc.limits, cost, slots, marginMs, within, capUs, 0, make([]int64, len(tc.limits)))
					v, err := reserve.Run(ctx, c, []string{key}, args...).Result()
					if err != nil {
						t.Fatal(err)
					}
					if got, _, err = reserveReply(nil, v, slots, most, capUs); err != nil {
						t.Fatal(err)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("step %d (cost %d, %d slots, within %dµs, pause %dµs ahead): Lua waits %v µs, Go %v",
						step, cost, slots, within, max(pauseUntil-now, 0), got, want)
				}
			}
			t.Logf("%d slots spent, %d reservations refused", spent, refused)
			if spent < 100 || refused < 20 {
				t.Errorf("%d spent, %d refused: the sequence no longer tests both", spent, refused)
			}
		})
	}
}
