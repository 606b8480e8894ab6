package sharedquota

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/headway-go/headway"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	goleak.VerifyTestMain(m)
}

func newQuota(t testing.TB, c redis.UniversalClient, opts ...Option) *Redis {
	t.Helper()
	q := NewRedis(c, append([]Option{WithPrefix(testPrefix(t)), WithTimeout(slowTimeout)}, opts...)...)
	t.Cleanup(func() { q.Close() })
	return q
}

func reserve(t testing.TB, q *Redis, key string, cost int, limits ...headway.Limit) time.Duration {
	t.Helper()
	d, err := q.Reserve(context.Background(), key, limits, cost, forever)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	return d
}

// near reports whether d, a wait a reservation returned, is want, less the
// time that passed since the reservations it follows. On a loaded machine
// that can be a few hundred milliseconds, so the tests that use near work
// in intervals of a second or more: a wait is never longer than the
// schedule says, and only scheduling noise makes it shorter.
func near(d, want time.Duration) bool {
	return d <= want && d >= want-nearSlack
}

const nearSlack = 400 * time.Millisecond

func TestReserveGCRA(t *testing.T) {
	c := newClient(t, redisAddr(t))
	q := newQuota(t, c)
	lim := headway.Every(time.Second).WithBurst(3) // T = 1s
	for i := range 3 {
		if d := reserve(t, q, "tok", 1, lim); d != 0 {
			t.Fatalf("reservation %d within the burst waits %v", i, d)
		}
	}
	for i := 1; i <= 3; i++ {
		if d := reserve(t, q, "tok", 1, lim); !near(d, time.Duration(i)*time.Second) {
			t.Fatalf("reservation %d past the burst waits %v, want about %ds", i, d, i)
		}
	}
	// A cost of 2 spends two intervals; a request-counting limit one.
	if d := reserve(t, q, "cost", 2, lim); d != 0 {
		t.Fatalf("first cost-2 reservation waits %v", d)
	}
	if d := reserve(t, q, "cost", 2, lim); !near(d, time.Second) {
		t.Fatalf("second cost-2 reservation waits %v, want about 1s", d)
	}
	if d := reserve(t, q, "unweighted", 5, lim.Requests()); d != 0 {
		t.Fatalf("a request-counting limit charged the cost: wait %v", d)
	}
}

func TestReserveAllLimitsAtOnce(t *testing.T) {
	c := newClient(t, redisAddr(t))
	q := newQuota(t, c)
	fast := headway.PerSecond(10).WithBurst(10) // 100ms
	slow := headway.Every(2 * time.Second).WithBurst(2)
	reserve(t, q, "k", 1, fast, slow)
	reserve(t, q, "k", 1, fast, slow)
	// The slow limit holds the third request 2s; the fast one alone
	// would let it go.
	if d := reserve(t, q, "k", 1, fast, slow); !near(d, 2*time.Second) {
		t.Fatalf("third request waits %v, want about 2s", d)
	}
	// As in the in-process pacer, the departure moved every limit's TAT
	// to itself plus one interval: the fast limit's TAT is now 2.1s, so a
	// request on it alone may leave 9 intervals before: at 1.2s.
	if d := reserve(t, q, "k", 1, fast); !near(d, 1200*time.Millisecond) {
		t.Fatalf("the fast limit alone waits %v, want about 1.2s", d)
	}
}

func TestKeysHashedTaggedAndExpiring(t *testing.T) {
	c := newClient(t, redisAddr(t))
	prefix := testPrefix(t)
	q := NewRedis(c, WithPrefix(prefix), WithHeartbeat(time.Second), WithTimeout(slowTimeout))
	defer q.Close()
	secret := "Bearer sk-live-secret"
	reserve(t, q, secret, 1, headway.PerSecond(10).WithBurst(2))
	if err := q.Pause(context.Background(), secret, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return q.Live(secret) == 1 })
	quota, procs := q.KeyNames(secret)
	keys, err := c.Keys(context.Background(), prefix+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Fatalf("keys %v, want %s and %s", keys, quota, procs)
	}
	if procs != prefix+":procs" {
		t.Errorf("the processes are announced in %q, want one set for the prefix", procs)
	}
	if strings.Count(quota, "{") != 1 || strings.Count(quota, "}") != 1 {
		t.Errorf("quota %q: want one hash tag", quota)
	}
	for _, k := range keys {
		if strings.Contains(k, "secret") || strings.Contains(k, "sk-live") {
			t.Errorf("key name %q holds the user's key", k)
		}
		ttl, err := c.PTTL(context.Background(), k).Result()
		if err != nil || ttl <= 0 || ttl > 5*time.Second {
			t.Errorf("key %q: TTL %v (%v), want a short positive one", k, ttl, err)
		}
	}
}

func TestPauseShared(t *testing.T) {
	addr := redisAddr(t)
	a := newQuota(t, newClient(t, addr))
	b := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(a.cfg.prefix))
	defer b.Close()
	lim := headway.PerSecond(1000).WithBurst(100)
	if err := a.Pause(context.Background(), "k", 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := reserve(t, b, "k", 1, lim); !near(d, 3*time.Second) {
		t.Fatalf("the other process waits %v, want about 3s", d)
	}
	// A shorter pause does not cut the longer one.
	if err := b.Pause(context.Background(), "k", 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := reserve(t, a, "k", 1, lim); d < 2*time.Second {
		t.Fatalf("a shorter pause cut the longer one: wait %v", d)
	}
	// A pause holds even a key without limits.
	if d := reserve(t, a, "k", 1); d < 2*time.Second {
		t.Fatalf("no limits: wait %v", d)
	}
}

func TestScriptFlush(t *testing.T) {
	c := newClient(t, redisAddr(t))
	q := newQuota(t, c)
	lim := headway.Every(time.Second).WithBurst(1)
	reserve(t, q, "k", 1, lim)
	if err := c.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if d := reserve(t, q, "k", 1, lim); !near(d, time.Second) {
		t.Fatalf("after SCRIPT FLUSH: wait %v, want about 1s", d)
	}
	if err := q.Pause(context.Background(), "k", time.Millisecond); err != nil {
		t.Fatalf("Pause after SCRIPT FLUSH: %v", err)
	}
	if s := q.Stats(); s.Errors != 0 || s.Degraded != 0 {
		t.Fatalf("stats %+v, want no errors", s)
	}
}

func TestInvalid(t *testing.T) {
	c := newClient(t, redisAddr(t))
	q := newQuota(t, c)
	if _, err := q.Reserve(context.Background(), "k", []headway.Limit{{}}, 1, forever); !errors.Is(err, ErrInvalidLimit) {
		t.Fatalf("zero limit: %v", err)
	}
	if _, err := q.Reserve(context.Background(), "k", nil, -1, forever); !errors.Is(err, ErrInvalidLimit) {
		t.Fatalf("negative cost: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := q.Reserve(ctx, "k", nil, 1, forever); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	q.Close()
	if _, err := q.Reserve(context.Background(), "k", nil, 1, forever); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if err := q.Pause(context.Background(), "k", time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("Pause after Close: %v", err)
	}
}

func TestReplyChecks(t *testing.T) {
	z := int64(0)
	for _, v := range []any{nil, "x", int64(3), []any{"1", z, z}, []any{int64(-1), z, z}, []any{int64(1), int64(2), z, z},
		[]any{}, []any{int64(1), z}, []any{int64(101), z, z}, []any{int64(1), int64(51), z}, []any{int64(1), int64(-1), z},
		[]any{z, z, int64(101)}, []any{z, z, int64(-1)}} {
		_, _, err := reserveReply(nil, v, 1, 100, 50)
		var re *ReplyError
		if !errors.As(err, &re) || !errors.Is(err, ErrBadReply) || !strings.HasPrefix(err.Error(), "sharedquota: ") {
			t.Errorf("reserveReply(%#v) = %v", v, err)
		}
	}
	if _, err := intReply("pause", "1"); !errors.Is(err, ErrBadReply) {
		t.Errorf("intReply(string) = %v", err)
	}
	if w, p, err := reserveReply(nil, []any{int64(0), int64(7), int64(50), int64(90)}, 2, 100, 50); err != nil || w[1] != 7 || p.pause != 50 || p.last != 90 {
		t.Errorf("reserveReply(good) = %v, %v, %v", w, p, err)
	}
	ue := &UnavailableError{Op: "reserve", Err: context.DeadlineExceeded}
	if !errors.Is(ue, ErrUnavailable) || !errors.Is(ue, context.DeadlineExceeded) {
		t.Errorf("UnavailableError does not unwrap: %v", ue)
	}
}

func TestLargeTimestampsRoundTrip(t *testing.T) {
	// The TAT is kept in µs of Unix time (16 digits): check that the
	// script writes it exactly, not rounded to 14 digits by tostring.
	c := newClient(t, redisAddr(t))
	q := newQuota(t, c)
	lim := headway.Every(3 * time.Second).WithBurst(1) // T = 3000000µs
	reserve(t, q, "k", 1, lim)
	quota, _ := q.KeyNames("k")
	v, err := c.HGet(context.Background(), quota, "3000000:1").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(v) < 16 || strings.ContainsAny(v, "e.") {
		t.Fatalf("TAT stored as %q", v)
	}
}

func waitFor(t testing.TB, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOneLimitScriptSharesState: a key reserved under one limit (the lean
// script) and under several (the general one) keeps one TAT per limit, so
// processes configured either way share the quota.
func TestOneLimitScriptSharesState(t *testing.T) {
	c := newClient(t, redisAddr(t))
	q := newQuota(t, c)
	lim := headway.Every(time.Second).WithBurst(2) // T = 1s
	wide := headway.PerSecond(1000).WithBurst(1000)
	reserve(t, q, "k", 1, lim)
	reserve(t, q, "k", 1, lim)
	if d := reserve(t, q, "k", 1, lim, wide); !near(d, time.Second) {
		t.Fatalf("the general script waits %v after two lean reservations, want about 1s", d)
	}
	if d := reserve(t, q, "k", 1, lim); !near(d, 2*time.Second) {
		t.Fatalf("the lean script waits %v after the general one, want about 2s", d)
	}
	if err := q.Pause(context.Background(), "k", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := reserve(t, q, "k", 1, lim); !near(d, 5*time.Second) {
		t.Fatalf("the lean script ignores the pause: wait %v", d)
	}
	quota, _ := q.KeyNames("k")
	if ttl, err := c.PTTL(context.Background(), quota).Result(); err != nil || ttl <= 0 || ttl > 8*time.Second {
		t.Fatalf("TTL %v (%v)", ttl, err)
	}

}

// forever is a within longer than any wait in the tests.
const forever = 24 * time.Hour

// slowTimeout bounds the tests' calls to Redis instead of the default 50ms:
// on a loaded machine a call may take longer, and Redis slow is still
// Redis, not a fallback. The fault tests that need a short one (a Redis
// that accepts and never answers) set their own.
const slowTimeout = 2 * time.Second

// TestSaltAndPrefix: with a salt, a quota's name is an HMAC of the key
// (no one reading Redis can test a guessed token without the salt), and
// processes share it only with the same salt; a prefix with Cluster hash
// tag braces is refused.
func TestSaltAndPrefix(t *testing.T) {
	addr := redisAddr(t)
	plain := newQuota(t, newClient(t, addr))
	salted := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(plain.cfg.prefix), WithSalt([]byte("s3cret")))
	defer salted.Close()
	other := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(plain.cfg.prefix), WithSalt([]byte("another")))
	defer other.Close()
	same := NewRedis(newClient(t, addr), WithTimeout(slowTimeout), WithPrefix(plain.cfg.prefix), WithSalt([]byte("s3cret")))
	defer same.Close()
	q1, _ := plain.KeyNames("token")
	q2, _ := salted.KeyNames("token")
	q3, _ := other.KeyNames("token")
	q4, _ := same.KeyNames("token")
	if q1 == q2 || q2 == q3 || q2 != q4 {
		t.Fatalf("names %s %s %s %s: want the salt to change the name, and the same salt to keep it", q1, q2, q3, q4)
	}
	lim := headway.Every(time.Second)
	reserve(t, salted, "token", 1, lim)
	if d := reserve(t, same, "token", 1, lim); !near(d, time.Second) {
		t.Fatalf("the same salt does not share: wait %v", d)
	}
	if d := reserve(t, other, "token", 1, lim); d != 0 {
		t.Fatalf("another salt shares: wait %v", d)
	}
	for _, p := range []string{"a{b}", "{x", "y}"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("WithPrefix(%q) did not panic", p)
				}
			}()
			WithPrefix(p)
		}()
	}
}
