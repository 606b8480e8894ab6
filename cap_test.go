package headway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/internal/metrictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A wait a server names above the cap holds its key for the cap at most:
// while what is left of it is longer, a request fails at once with a
// *WaitError naming it; then the key waits out the rest (issue 9, item 2).
func TestAServerWaitAboveTheCapFailsRequestsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &adaptRT{script: func(n int, _ *http.Request) (int, http.Header) {
			if n == 1 {
				return 429, hdr("Retry-After", "86400")
			}
			return 200, nil
		}}
		var pauses []PauseEvent
		var buf syncBuffer
		mp := metrictest.NewProvider()
		tr := New(rt, WithMaxServerWait(time.Minute), WithMeterProvider(mp),
			WithLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))),
			WithHooks(Hooks{OnPause: func(e PauseEvent) { pauses = append(pauses, e) }}))
		start := time.Now()
		assert.Equal(t, 429, get(t, tr, "http://api.test/").StatusCode)
		assert.Zero(t, time.Since(start), "a wait above the cap goes back at once")
		require.Len(t, pauses, 1)
		assert.Equal(t, time.Minute, pauses[0].Wait)
		assert.Equal(t, 24*time.Hour, pauses[0].Stated)
		assert.Contains(t, buf.String(), "level=WARN")
		assert.Contains(t, buf.String(), "wait=24h0m0s")
		assert.EqualValues(t, 1, collectMetrics(t, mp).count("headway.requests", attrOutcome.String("wait_capped")))

		// A request without a deadline does not wait silently for a day.
		_, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
		var we *WaitError
		require.ErrorAs(t, err, &we)
		assert.Equal(t, WaitError{Wait: 24 * time.Hour, Allowed: time.Minute, Stated: true}, *we)
		assert.ErrorIs(t, err, ErrWaitTooLong)
		assert.False(t, errors.Is(err, context.DeadlineExceeded), "not the caller's deadline")
		assert.Zero(t, time.Since(start))

		// Once what is left fits the cap, requests wait for its end.
		time.Sleep(24*time.Hour - 30*time.Second)
		at := time.Now()
		assert.Equal(t, 200, get(t, tr, "http://api.test/").StatusCode)
		assert.Equal(t, 30*time.Second, time.Since(at))
		assert.Len(t, rt.log(), 2)
	})
}

// Requests already queued when a wait above the cap comes fail with it.
func TestAServerWaitAboveTheCapFailsTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &adaptRT{script: func(n int, _ *http.Request) (int, http.Header) {
			if n == 2 {
				return 429, hdr("Retry-After", "3600")
			}
			return 200, nil
		}}
		tr := New(rt, WithLimit(PerSecond(1)), WithRetry(RetryOptions{MaxAttempts: 1}))
		get(t, tr, "http://api.test/")
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
				if err == nil {
					drain(resp)
				}
				errs <- err
			}()
		}
		synctest.Wait()
		start := time.Now()
		var we *WaitError
		for range 2 {
			if err := <-errs; err != nil {
				require.ErrorAs(t, err, &we)
				assert.True(t, we.Stated)
			}
		}
		assert.Equal(t, time.Second, time.Since(start), "the queued request failed when the 429 came")
		assert.Len(t, rt.log(), 2)
	})
}

// No wait a server names, however written, holds a key beyond the cap,
// and an absolute time is measured against a Date only when that Date is
// sane.
func TestEveryServerWaitIsBounded(t *testing.T) {
	const limit = 10 * time.Minute
	epoch := func(d time.Duration) string { return strconv.FormatInt(synctestEpoch.Add(d).Unix(), 10) }
	for _, c := range []struct {
		name   string
		status int
		header http.Header
		want   time.Duration // how long the next request waits; -1: it fails at once
	}{
		{"huge Retry-After", 429, hdr("Retry-After", "99999999999"), -1},
		{"Retry-After in 9999", 429, hdr("Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"), -1},
		{"RateLimit", 429, hdr("RateLimit", `"d";r=0;t=9999999999`), -1},
		{"X-RateLimit-Reset on a 200", 200, hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "99999999"), -1},
		{"Date of 1970", 429, hdr("Date", "Thu, 01 Jan 1970 00:00:00 GMT",
			"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(time.Minute)), time.Minute},
		{"Date of 9999", 429, hdr("Date", "Fri, 31 Dec 9999 23:59:59 GMT",
			"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(time.Minute)), time.Minute},
		{"Retry-After at the cap", 429, hdr("Retry-After", strconv.Itoa(int(limit.Seconds()))), limit},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := &adaptRT{script: func(n int, _ *http.Request) (int, http.Header) {
					if n == 1 {
						return c.status, c.header
					}
					return 200, nil
				}}
				tr := New(rt, WithRetry(RetryOptions{MaxAttempts: 1}))
				get(t, tr, "http://api.test/")
				start := time.Now()
				resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
				if c.want < 0 {
					var we *WaitError
					require.ErrorAs(t, err, &we)
					assert.True(t, we.Stated)
					assert.Equal(t, limit, we.Allowed)
					assert.Greater(t, we.Wait, limit)
					assert.Zero(t, time.Since(start))
					return
				}
				require.NoError(t, err)
				drain(resp)
				assert.Equal(t, c.want, time.Since(start))
			})
		})
	}
}
