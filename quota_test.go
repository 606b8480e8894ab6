package headway

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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
