package headway

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/ratelimitheader"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memQuota is a SharedQuota in memory: one GCRA per key at 1 request per
// second, shared by every Transport that holds it.
type memQuota struct {
	mu     sync.Mutex
	next   map[string]time.Time
	pauses map[string]time.Duration
}

func (q *memQuota) Reserve(_ context.Context, key string, _ []Limit, _ int, within time.Duration) (time.Duration, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	at := now
	if q.next[key].After(now) {
		at = q.next[key]
	}
	if at.Sub(now) > within {
		return at.Sub(now), nil // nothing spent
	}
	q.next[key] = at.Add(time.Second)
	return at.Sub(now), nil
}

func (q *memQuota) Pause(_ context.Context, key string, d time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pauses[key] = d
	if until := time.Now().Add(d); until.After(q.next[key]) {
		q.next[key] = until
	}
	return nil
}

func TestASharedQuotaPacesSeveralTransportsAsOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &memQuota{next: map[string]time.Time{}, pauses: map[string]time.Duration{}}
		stub := &stubRT{}
		a := New(stub, WithSharedQuota(q), WithLimit(PerSecond(100)))
		b := New(stub, WithSharedQuota(q), WithLimit(PerSecond(100)))
		start := time.Now()
		var wg sync.WaitGroup
		for _, tr := range []http.RoundTripper{a, b} {
			wg.Go(func() { sendAll(t, tr, "http://api.test/", 3, 1) })
		}
		wg.Wait()
		got := offsets(start, stub.times())
		assert.Equal(t, []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second, 5 * time.Second}, got)

		// A wait past the deadline fails at once.
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := a.RoundTrip(mustReq(t, "http://api.test/").WithContext(ctx))
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestAThrottleIsSharedAsAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &memQuota{next: map[string]time.Time{}, pauses: map[string]time.Duration{}}
		rt := &adaptRT{script: func(n int, _ *http.Request) (int, http.Header) {
			if n == 1 {
				return 429, hdr("Retry-After", "7")
			}
			return 200, nil
		}}
		a := New(rt, WithSharedQuota(q), WithLimit(PerSecond(100)), WithRetry(RetryOptions{MaxAttempts: 1}))
		b := New(rt, WithSharedQuota(q), WithLimit(PerSecond(100)))
		assert.Equal(t, 429, get(t, a, "http://api.test/").StatusCode)
		require.Equal(t, 7*time.Second, q.pauses["api.test"])
		get(t, b, "http://api.test/") // another process waits out the pause
		assert.Equal(t, 7*time.Second, rt.log()[1].at)
	})
}

// checkQuota is a memQuota that also says whether a key is paused.
type checkQuota struct {
	memQuota
	checks int
}

func (q *checkQuota) PausedFor(_ context.Context, key string) (time.Duration, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.checks++
	return max(time.Until(q.next[key].Add(-time.Second)), 0), nil
}

func TestAPauseHoldsRequestsAlreadyReserved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &checkQuota{memQuota: memQuota{next: map[string]time.Time{}, pauses: map[string]time.Duration{}}}
		stub := &stubRT{}
		a := New(stub, WithSharedQuota(q), WithLimit(PerSecond(100)))
		start := time.Now()
		var wg sync.WaitGroup
		wg.Go(func() { sendAll(t, a, "http://api.test/", 2, 2) }) // slots at 0s and 1s
		time.Sleep(500 * time.Millisecond)
		require.NoError(t, q.Pause(context.Background(), "api.test", 3*time.Second)) // until 3.5s
		wg.Wait()
		// The first left at once, with no check; the second, which had
		// reserved 1s, found the pause after its wait, reserved again,
		// and checked once more after that wait.
		assert.Equal(t, []time.Duration{0, 3500 * time.Millisecond}, offsets(start, stub.times()))
		assert.Equal(t, 2, q.checks)
	})
}

// TestASharedSlotIsTakenOnlyWithinTheDeadline: a request whose deadline,
// or MaxWait, cannot wait for its shared slot fails at once and takes no
// slot from the other processes; a request with neither is bounded by the
// longest wait the Transport sleeps on.
func TestASharedSlotIsTakenOnlyWithinTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &memQuota{next: map[string]time.Time{}, pauses: map[string]time.Duration{}}
		stub := &stubRT{}
		a := New(stub, WithSharedQuota(q), WithLimit(PerSecond(100)))
		b := New(stub, WithSharedQuota(q), WithLimit(PerSecond(100)),
			WithQueue(QueueOptions{MaxWait: 600 * time.Millisecond}))
		start := time.Now()
		sendAll(t, a, "http://api.test/", 3, 3) // slots at 0, 1s, 2s
		next := q.next["api.test"]              // 3s: 1s from now

		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := a.RoundTrip(mustReq(t, "http://api.test/").WithContext(ctx))
		var we *WaitError
		require.ErrorAs(t, err, &we)
		assert.Equal(t, 300*time.Millisecond, we.Allowed)
		assert.Equal(t, next, q.next["api.test"], "a slot the deadline cannot use was spent")

		_, err = b.RoundTrip(mustReq(t, "http://api.test/"))
		require.ErrorAs(t, err, &we)
		assert.Equal(t, 600*time.Millisecond, we.Allowed)
		assert.Equal(t, next, q.next["api.test"], "a slot MaxWait cannot use was spent")

		c := New(stub, WithSharedQuota(q), WithLimit(PerSecond(100)), WithMaxServerWait(900*time.Millisecond))
		_, err = c.RoundTrip(mustReq(t, "http://api.test/"))
		require.ErrorAs(t, err, &we)
		assert.Equal(t, 900*time.Millisecond, we.Allowed)
		assert.Equal(t, next, q.next["api.test"])

		// The slot refused is the next request's.
		get(t, a, "http://api.test/")
		assert.Equal(t, 3*time.Second, time.Since(start))
	})
}

// gcraQuota is a SharedQuota in memory that spends the limits it is given,
// as one GCRA per key and limit: what sharedquota does in Redis.
type gcraQuota struct {
	mu   sync.Mutex
	tat  map[string]time.Time
	seen [][]Limit
}

func (q *gcraQuota) Reserve(_ context.Context, key string, lims []Limit, _ int, within time.Duration) (time.Duration, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seen = append(q.seen, lims)
	now, wait := time.Now(), time.Duration(0)
	for _, l := range lims {
		iv, burst := l.Interval(), time.Duration(max(l.Burst, 1))
		wait = max(wait, q.tat[key+l.String()].Add(-(burst-1)*iv).Sub(now))
	}
	if wait > within {
		return wait, nil
	}
	for _, l := range lims {
		k := key + l.String()
		q.tat[k] = later(q.tat[k], now.Add(wait)).Add(l.Interval())
	}
	return wait, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (q *gcraQuota) Pause(context.Context, string, time.Duration) error { return nil }

// bucketServer is a token bucket server, rate per second up to burst,
// which says nothing but 429. Each process reaches it along its own path:
// the RoundTripper of via.
type bucketServer struct {
	mu            sync.Mutex
	rate, burst   float64
	tokens        float64
	at            time.Time
	admitted, tmr int
}

func (s *bucketServer) via(delay time.Duration) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		time.Sleep(delay)
		s.mu.Lock()
		defer s.mu.Unlock()
		now := time.Now()
		if s.at.IsZero() {
			s.tokens = s.burst
		}
		s.tokens = min(s.burst, s.tokens+now.Sub(s.at).Seconds()*s.rate)
		s.at = now
		code := http.StatusOK
		if s.tokens >= 1 {
			s.tokens--
			s.admitted++
		} else {
			code = http.StatusTooManyRequests
			s.tmr++
		}
		return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
}

// Issue 10: a fleet configured with the server's exact limits (20/s burst
// 10) and sharing them spent the whole burst at once; a process whose path
// to the server is slower started the server's bucket a few milliseconds
// after the shared schedule, and the first request of another process to
// leave at its slot after the burst came one token short: a throttle, and
// in the IETF dialect a pause of a second for every process. The shared
// reservation keeps one request of the burst in reserve, as each key's
// model of the server does on its own.
func TestASharedBurstKeepsOneInReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &bucketServer{rate: 20, burst: 10}
		q := &gcraQuota{tat: map[string]time.Time{}}
		lim := WithLimit(PerSecond(20).WithBurst(10))
		slow := New(srv.via(5*time.Millisecond), WithSharedQuota(q), lim, WithRetry(RetryOptions{MaxAttempts: 1}))
		fast := New(srv.via(0), WithSharedQuota(q), lim, WithRetry(RetryOptions{MaxAttempts: 1}))
		var wg sync.WaitGroup
		wg.Go(func() { sendAll(t, slow, "http://api.test/", 10, 10) })
		time.Sleep(20 * time.Millisecond) // the slow process took the burst
		wg.Go(func() { sendAll(t, fast, "http://api.test/", 10, 2) })
		wg.Wait()
		assert.Zero(t, srv.tmr, "throttled")
		assert.Equal(t, 20, srv.admitted)
		for _, l := range q.seen {
			assert.Equal(t, []Limit{PerSecond(20).WithBurst(9)}, l) // every process, every request
		}
	})
}

// learnQuota is a SharedLearner that paces nothing and records what it
// is told to learn; err, when set, is Learn's answer.
type learnQuota struct {
	mu      sync.Mutex
	learned []ratelimitheader.Signal
	err     error
}

func (q *learnQuota) Reserve(context.Context, string, []Limit, int, time.Duration) (time.Duration, error) {
	return 0, nil
}

func (q *learnQuota) Pause(context.Context, string, time.Duration) error { return nil }

func (q *learnQuota) Learn(_ context.Context, _ string, sig ratelimitheader.Signal) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.learned = append(q.learned, sig)
	return q.err
}

// TestABareThrottleIsLeftToTheFleet: on a key without limits, a bare 429
// goes to the SharedLearner, which paces the fleet after it: the key does
// not cut its own pace on top (the requests after it leave as the shared
// quota says, here at once). When Learn fails, the key cuts its own pace,
// as it does without a shared quota. A key with limits of its own keeps
// its rules, and tells the learner nothing of a bare throttle.
func TestABareThrottleIsLeftToTheFleet(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		limited bool
	}{{name: "shared"}, {name: "not shared", err: errors.New("redis down")}, {name: "limits", limited: true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := &learnQuota{err: tc.err}
				rt := &adaptRT{script: func(n int, _ *http.Request) (int, http.Header) {
					if n == 2 {
						return 429, nil // no header at all
					}
					return 200, nil
				}}
				opts := []Option{WithSharedQuota(q), WithRetry(RetryOptions{MaxAttempts: 1})}
				if tc.limited {
					opts = append(opts, WithLimit(PerSecond(1000).WithBurst(100)))
				}
				tr := New(rt, opts...)
				get(t, tr, "http://api.test/")
				assert.Equal(t, 429, get(t, tr, "http://api.test/").StatusCode)
				q.mu.Lock()
				learned := slices.Clone(q.learned)
				q.mu.Unlock()
				if tc.limited {
					assert.Empty(t, learned, "a key with limits shares no bare throttle")
				} else {
					require.Len(t, learned, 1)
					assert.True(t, learned[0].Throttled && !learned[0].HasRemaining)
				}
				start := time.Since(synctestEpoch)
				for range 4 {
					get(t, tr, "http://api.test/")
				}
				log := rt.log()
				last := log[len(log)-1].at - start
				if tc.err == nil {
					assert.Zero(t, last, "the fleet paces the key, not the key itself")
				} else {
					assert.Greater(t, last, time.Duration(0), "Learn failed: the key cuts its own pace")
				}
			})
		})
	}
}
