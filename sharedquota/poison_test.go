package sharedquota

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/headway-go/headway"
)

// TestPoisonedValues: whatever another program left in a quota's hash,
// text, NaN, inf, negative or huge numbers, a reservation answers at once
// with a wait no longer than the cap, counts no error, leaves the field
// repaired and the hash with a bounded TTL. (Issue 10, item 6: a pause of
// MaxInt64 made Reserve return -498,911h; NaN paused forever; an exp of
// 1e300 or inf never expired.)
func TestPoisonedValues(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	ctx := context.Background()
	lim := headway.Every(time.Second).WithBurst(1) // field "1000000:1"
	bad := []string{"9223372036854775807", "nan", "-nan", "inf", "-inf", "1e300", "-5", "abc", "", "0x7fffffffffffffff", "1e15"}
	capWait := maxServerWait
	for _, field := range []string{"pause", "exp", "1000000:1", "li", "lb", "lu", "lt", "hw"} {
		for _, v := range bad {
			for _, limits := range [][]headway.Limit{{lim}, {lim, headway.PerSecond(1000)}, nil} {
				name := field + "=" + v + "/" + strconv.Itoa(len(limits)) + "limits"
				q := newQuota(t, c, WithHeartbeat(time.Hour))
				quota, _ := q.KeyNames("k")
				// A hash as a process leaves it, but one field.
				now, err := c.Time(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				nowUs := now.UnixMicro()
				fields := map[string]any{
					"pause": nowUs - 1, "exp": nowUs + 2_000_000, "1000000:1": nowUs,
					"li": 1_000_000, "lb": 1, "lu": nowUs + 60_000_000, "lt": nowUs,
				}
				fields[field] = v
				if err := c.HSet(ctx, quota, fields).Err(); err != nil {
					t.Fatal(err)
				}
				if field != "exp" { // a bad exp with no TTL at all: the worst case
					c.PExpire(ctx, quota, 5*time.Second)
				}
				d, err := q.Reserve(ctx, "k", limits, 1, forever)
				if err != nil || d < 0 || d > capWait {
					t.Fatalf("%s: Reserve = %v, %v; want a wait from 0 to the cap", name, d, err)
				}
				if _, err := q.PausedFor(ctx, "k"); err != nil {
					t.Fatalf("%s: PausedFor: %v", name, err)
				}
				if err := q.Pause(ctx, "k", time.Millisecond); err != nil {
					t.Fatalf("%s: Pause: %v", name, err)
				}
				if s := q.Stats(); s.Errors != 0 || s.Degraded != 0 {
					t.Fatalf("%s: stats %+v, want no errors and nothing degraded", name, s)
				}
				ttl, err := c.PTTL(ctx, quota).Result()
				if err != nil || ttl <= 0 || ttl > capWait+2*time.Minute {
					t.Fatalf("%s: TTL %v (%v), want a bounded one", name, ttl, err)
				}
				// What the scripts keep of the fields they read is valid.
				for _, f := range []string{"pause", "exp"} {
					s, err := c.HGet(ctx, quota, f).Result()
					n, perr := strconv.ParseInt(s, 10, 64)
					if err != nil || perr != nil || n < 0 || n > nowUs+int64((capWait+2*time.Minute)/time.Microsecond) {
						t.Fatalf("%s: %s left as %q (%v)", name, f, s, err)
					}
				}
				q.Close()
				c.Del(ctx, quota)
			}
		}
	}
}

// TestPoisonedTATWaitsOneInterval: a TAT no process could have written
// reads as an empty bucket: the next request waits one interval, and the
// quota goes on from there (it used to wait for ever, or not at all). Each
// value is met by a process of its own: one that booked the schedule
// before records it again (see TestForgottenStateIsRecordedAgain).
func TestPoisonedTATWaitsOneInterval(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	ctx := context.Background()
	lim := headway.Every(time.Second).WithBurst(2) // field "1000000:2"
	for _, v := range []string{"1e300", "inf", "nan", "9223372036854775807"} {
		q := newQuota(t, c)
		quota, _ := q.KeyNames("k")
		if err := c.HSet(ctx, quota, "1000000:2", v).Err(); err != nil {
			t.Fatal(err)
		}
		if d := reserve(t, q, "k", 1, lim); !near(d, time.Second) {
			t.Fatalf("TAT %s: wait %v, want one interval", v, d)
		}
		if d := reserve(t, q, "k", 1, lim); !near(d, 2*time.Second) {
			t.Fatalf("TAT %s: second wait %v, want two intervals", v, d)
		}
	}
}

// TestLongPausesAreCapped: a pause longer than the cap, however long
// (a year-long Retry-After; one whose microseconds overflow), pauses every
// process for the cap, no longer; a pause stored a little past the cap (a
// failover's clock) reads as the cap. (Issue 10, item 7.)
func TestLongPausesAreCapped(t *testing.T) {
	addr := redisAddr(t)
	a := newQuota(t, newClient(t, addr))
	b := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
	defer b.Close()
	ctx := context.Background()
	capWait := maxServerWait
	for i, d := range []time.Duration{365 * 24 * time.Hour, math.MaxInt64, capWait + time.Second} {
		key := "k" + strconv.Itoa(i)
		if err := a.Pause(ctx, key, d); err != nil {
			t.Fatalf("Pause(%v): %v", d, err)
		}
		if p, err := b.PausedFor(ctx, key); err != nil || !near(p, capWait) {
			t.Fatalf("after Pause(%v), the other process is paused %v (%v), want the cap", d, p, err)
		}
		if w := reserve(t, b, key, 1, headway.PerSecond(10)); !near(w, capWait) {
			t.Fatalf("after Pause(%v), the other process waits %v, want the cap", d, w)
		}
		if p := a.state(key).pausedFor(a.now()); !near(p, capWait) {
			t.Fatalf("after Pause(%v), this process holds a pause of %v, want the cap", d, p)
		}
	}
	c := newClient(t, addr)
	quota, _ := a.KeyNames("past")
	now, _ := c.Time(ctx).Result()
	c.HSet(ctx, quota, "pause", now.Add(capWait+30*time.Second).UnixMicro())
	if p, err := b.PausedFor(ctx, "past"); err != nil || !near(p, capWait) {
		t.Fatalf("a pause stored 30s past the cap reads as %v (%v), want the cap", p, err)
	}
	c.Del(ctx, quota)
}

// TestHeartbeatDropsForeverMembers: a member announced for ever (score
// inf, or far ahead) is not counted as a live process.
func TestHeartbeatDropsForeverMembers(t *testing.T) {
	addr := redisAddr(t)
	c := newClient(t, addr)
	q := newQuota(t, c, WithHeartbeat(50*time.Millisecond))
	_, procs := q.KeyNames("k")
	ctx := context.Background()
	c.ZAdd(ctx, procs, redisZ("ghost", math.Inf(1)), redisZ("far", 1e15))
	reserve(t, q, "k", 1, headway.PerSecond(10))
	waitFor(t, 10*time.Second, func() bool { return q.Live("k") == 1 })
}
