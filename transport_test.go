package headway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func offsets(start time.Time, ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(start)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func TestPacingIsExactOverALongRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		tr := New(stub, WithLimit(PerSecond(50)))
		start := time.Now()
		const n = 10_000
		sendAll(t, tr, "http://api.test/x", n, 32)

		got := offsets(start, stub.times())
		require.Len(t, got, n)
		for i, d := range got {
			if want := time.Duration(i) * 20 * time.Millisecond; d != want {
				t.Fatalf("request %d left at %v, want %v", i, d, want)
			}
		}
		assert.Equal(t, time.Duration(n-1)*20*time.Millisecond, time.Since(start))
	})
}

func TestPacingWithAnIntervalThatIsNotWholeNanoseconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		tr := New(stub, WithLimit(PerSecond(3)))
		start := time.Now()
		sendAll(t, tr, "http://api.test/x", 301, 4)
		got := offsets(start, stub.times())
		// Never faster than 3/s: 300 intervals take at least 100 s, and the
		// rounding to whole nanoseconds costs no more than 300 ns.
		last := got[len(got)-1]
		assert.GreaterOrEqual(t, last, 100*time.Second)
		assert.Less(t, last, 100*time.Second+time.Microsecond)
	})
}

func TestBurstLeavesAtOnceThenPaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		tr := New(stub, WithLimit(PerSecond(10).WithBurst(5)))
		start := time.Now()
		sendAll(t, tr, "http://api.test/x", 12, 12)
		got := offsets(start, stub.times())
		for i := range 5 {
			assert.Zero(t, got[i], "burst request %d", i)
		}
		for i := 5; i < 12; i++ {
			assert.Equal(t, time.Duration(i-4)*100*time.Millisecond, got[i], "request %d", i)
		}

		// After an idle spell the burst is back, but no more than the burst.
		time.Sleep(time.Hour)
		stub.sent = nil
		start = time.Now()
		sendAll(t, tr, "http://api.test/x", 6, 6)
		got = offsets(start, stub.times())
		assert.Equal(t, []time.Duration{0, 0, 0, 0, 0, 100 * time.Millisecond}, got)
	})
}

func TestKeysDoNotDelayEachOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		tr := New(stub, WithLimit(PerSecond(1)))
		ctx, cancel := context.WithCancel(context.Background())
		// A backlog on one key...
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() {
				req := mustReq(t, "http://slow.test/").WithContext(ctx)
				resp, err := tr.RoundTrip(req)
				if err == nil {
					drain(resp)
				}
			})
		}
		synctest.Wait()
		// ...does not delay another.
		start := time.Now()
		resp, err := tr.RoundTrip(mustReq(t, "http://fast.test/"))
		require.NoError(t, err)
		drain(resp)
		assert.Zero(t, time.Since(start))
		cancel()
		wg.Wait()
	})
}

func TestHostLimitsOverrideTheDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		tr := New(stub,
			WithLimit(PerSecond(10)),
			WithHostLimit("API.github.test", PerSecond(2)),
			WithHostLimit("other.test:8443", PerSecond(4)))
		for _, c := range []struct {
			url  string
			want time.Duration
		}{
			{"http://api.github.test/a", 500 * time.Millisecond},
			{"http://api.github.test:443/a", 500 * time.Millisecond},
			{"http://other.test:8443/a", 250 * time.Millisecond},
			{"http://unknown.test/a", 100 * time.Millisecond},
		} {
			stub.sent = nil
			start := time.Now()
			sendAll(t, tr, c.url, 3, 1)
			assert.Equal(t, []time.Duration{0, c.want, 2 * c.want}, offsets(start, stub.times()), c.url)
		}
	})
}

func TestQueueFullFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		tr := New(stub, WithLimit(PerSecond(1)), WithQueue(QueueOptions{MaxLen: 2}))
		sendAll(t, tr, "http://api.test/", 1, 1) // spends the burst
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
				assert.NoError(t, err)
				drain(resp)
			})
		}
		synctest.Wait() // both wait in the queue

		req, body := newBodyReq(t, "http://api.test/")
		start := time.Now()
		_, err := tr.RoundTrip(req)
		assert.ErrorIs(t, err, ErrQueueFull)
		assert.Zero(t, time.Since(start))
		assert.EqualValues(t, 1, body.closes.Load())
		wg.Wait()
		assert.Equal(t, 3, stub.count())
	})
}

func TestNoQueueMeansFailIfNotNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(&stubRT{}, WithLimit(PerSecond(1)), WithQueue(QueueOptions{MaxLen: -1}))
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
		require.NoError(t, err)
		drain(resp)
		_, err = tr.RoundTrip(mustReq(t, "http://api.test/"))
		assert.ErrorIs(t, err, ErrQueueFull)
	})
}

func TestCancelWhileWaitingReturnsAtOnceAndTheQueueMovesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		tr := New(stub, WithLimit(Every(time.Second)))
		sendAll(t, tr, "http://api.test/", 1, 1) // t=0

		// Three waiters: due at 1 s, 2 s and 3 s. Cancel the first at 0.5 s.
		ctx, cancel := context.WithCancel(context.Background())
		errs := make(chan error, 1)
		go func() {
			req, body := newBodyReq(t, "http://api.test/first")
			_, err := tr.RoundTrip(req.WithContext(ctx))
			assert.EqualValues(t, 1, body.closes.Load())
			errs <- err
		}()
		synctest.Wait()
		start := time.Now()
		var wg sync.WaitGroup
		var left [2]time.Duration
		for i := range 2 {
			wg.Go(func() {
				resp, err := tr.RoundTrip(mustReq(t, "http://api.test/behind"))
				assert.NoError(t, err)
				drain(resp)
				left[i] = time.Since(start)
			})
			synctest.Wait() // keep their order
		}
		time.Sleep(500 * time.Millisecond)
		cancelled := time.Now()
		cancel()
		err := <-errs
		assert.ErrorIs(t, err, context.Canceled)
		assert.Zero(t, time.Since(cancelled), "cancel returns at once")
		wg.Wait()
		// The slot at 1 s went to the first request behind.
		assert.ElementsMatch(t, []time.Duration{time.Second, 2 * time.Second}, left[:])
		assert.Equal(t, 3, stub.count())
	})
}

func TestDeadlineShorterThanTheKnownWaitFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		tr := New(stub, WithLimit(Every(time.Second)))
		sendAll(t, tr, "http://api.test/", 1, 1)

		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		req, body := newBodyReq(t, "http://api.test/")
		start := time.Now()
		_, err := tr.RoundTrip(req.WithContext(ctx))
		assert.Zero(t, time.Since(start))
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorIs(t, err, ErrWaitTooLong)
		var we *WaitError
		require.ErrorAs(t, err, &we)
		assert.Equal(t, time.Second, we.Wait)
		assert.Equal(t, 500*time.Millisecond, we.Allowed)
		assert.EqualValues(t, 1, body.closes.Load())
		assert.Equal(t, 1, stub.count())

		// Through an http.Client the error stays matchable and is a timeout.
		client := &http.Client{Transport: tr}
		req = mustReq(t, "http://api.test/").WithContext(ctx)
		_, err = client.Do(req)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		var ne interface{ Timeout() bool }
		require.ErrorAs(t, err, &ne)
		assert.True(t, ne.Timeout())

		// The known wait counts the queue ahead: with one waiter due at 1 s,
		// a 1.5 s deadline is too short for the next one, due at 2 s.
		go func() {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
			assert.NoError(t, err)
			drain(resp)
		}()
		synctest.Wait()
		ctx2, cancel2 := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel2()
		_, err = tr.RoundTrip(mustReq(t, "http://api.test/").WithContext(ctx2))
		require.ErrorAs(t, err, &we)
		assert.Equal(t, 2*time.Second, we.Wait)
		time.Sleep(time.Second)
	})
}

func TestMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		tr := New(stub, WithLimit(Every(time.Second)), WithMaxInFlight(1),
			WithQueue(QueueOptions{MaxWait: 3 * time.Second}))
		// A known wait above MaxWait fails at once.
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
		require.NoError(t, err)
		// The in-flight slot is held until the body is closed; a waiter
		// behind it (known wait 1 s) gives up when MaxWait passes.
		start := time.Now()
		_, err = tr.RoundTrip(mustReq(t, "http://api.test/"))
		assert.ErrorIs(t, err, ErrWaitTooLong)
		assert.Equal(t, 3*time.Second, time.Since(start))
		drain(resp)

		stub2 := &stubRT{}
		tr = New(stub2, WithLimit(Every(2*time.Second)), WithQueue(QueueOptions{MaxWait: 3 * time.Second}))
		sendAll(t, tr, "http://api.test/", 1, 1)
		go sendAll(t, tr, "http://api.test/", 1, 1) // due at 2 s
		synctest.Wait()
		start = time.Now()
		_, err = tr.RoundTrip(mustReq(t, "http://api.test/")) // due at 4 s
		var we *WaitError
		require.ErrorAs(t, err, &we)
		assert.Equal(t, 4*time.Second, we.Wait)
		assert.Zero(t, time.Since(start))
		time.Sleep(2 * time.Second)
	})
}

func TestMaxInFlightPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		stub.onRound = func(*http.Request) { time.Sleep(100 * time.Millisecond) }
		tr := New(stub, WithMaxInFlight(3))
		start := time.Now()
		var wg sync.WaitGroup
		for range 30 {
			wg.Go(func() {
				resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
				if assert.NoError(t, err) {
					time.Sleep(50 * time.Millisecond) // reading the body
					drain(resp)
				}
			})
		}
		wg.Wait()
		assert.EqualValues(t, 3, stub.peak.Load())
		assert.EqualValues(t, 30, stub.closes.Load())
		// A key with no limit first waits for one answer (100 ms), then
		// keeps three in flight: 29 more in ten rounds of 150 ms.
		assert.Equal(t, 100*time.Millisecond+10*150*time.Millisecond, time.Since(start))
	})
}

func TestMaxInFlightReleasesOnBaseError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{err: errBase}
		tr := New(stub, WithMaxInFlight(1), WithRetry(RetryOptions{MaxAttempts: 2}))
		for range 3 {
			_, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
			assert.ErrorIs(t, err, errBase)
			var re *RetryError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, 2, re.Attempts)
		}
		assert.Equal(t, 6, stub.count())
	})
}

func TestSeveralLimitsAreSpentTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		// 10 requests per second, and no more than 12 per 10 s.
		tr := New(stub, WithLimit(PerSecond(10).WithBurst(10), Per(12, 10*time.Second).WithBurst(12)))
		start := time.Now()
		sendAll(t, tr, "http://api.test/", 14, 14)
		got := offsets(start, stub.times())
		for i := range 10 {
			assert.Zero(t, got[i])
		}
		// The 11th and 12th are allowed by both at 100 ms and 200 ms, the
		// 13th must wait for the second limit: 10 s/12 after its bucket
		// filled, and so on.
		assert.Equal(t, 100*time.Millisecond, got[10])
		assert.Equal(t, 200*time.Millisecond, got[11])
		step := (10*time.Second + 11) / 12
		assert.Equal(t, step, got[12])
		assert.Equal(t, 2*step, got[13])
	})
}

func TestCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		// 10 requests per second, 1,000 tokens per second.
		tr := New(stub, WithLimit(PerSecond(10).WithBurst(10).Requests(), PerSecond(1000).WithBurst(1000)))
		start := time.Now()
		send := func(cost int) error {
			req := mustReq(t, "http://api.test/")
			resp, err := tr.RoundTrip(req.WithContext(WithCost(req.Context(), cost)))
			drain(resp)
			return err
		}
		require.NoError(t, send(600))
		require.NoError(t, send(400))
		assert.Zero(t, time.Since(start))
		require.NoError(t, send(500)) // tokens: half a second
		assert.Equal(t, 500*time.Millisecond, time.Since(start))

		// A cost above the burst can never be sent.
		req, body := newBodyReq(t, "http://api.test/")
		_, err := tr.RoundTrip(req.WithContext(WithCost(req.Context(), 1001)))
		assert.ErrorIs(t, err, ErrCostTooLarge)
		var ce *CostError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, 1001, ce.Cost)
		assert.Equal(t, 1000, ce.Limit.Count)
		assert.EqualValues(t, 1, body.closes.Load())

		// A negative cost is refused; a cost of zero spends no tokens but
		// still counts as a request.
		assert.ErrorIs(t, send(-1), ErrInvalidCost)
		for range 9 {
			require.NoError(t, send(0))
		}
		assert.Equal(t, 500*time.Millisecond, time.Since(start))
		require.NoError(t, send(0))
		assert.Equal(t, 600*time.Millisecond, time.Since(start))
	})
}

func TestCostFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		tr := New(stub, WithLimit(PerSecond(100).WithBurst(100)),
			WithCostFunc(func(r *http.Request) int { return len(r.URL.Path) }))
		start := time.Now()
		sendAll(t, tr, "http://api.test/"+strings.Repeat("a", 99), 2, 1) // cost 100 each
		assert.Equal(t, time.Second, time.Since(start))
	})
}

func TestRequestIsNeverMutated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		tr := New(stub, WithLimit(PerSecond(10)), WithMaxInFlight(1), WithKey(KeyByHeader("Authorization")))
		req, err := http.NewRequest(http.MethodPut, "http://api.test/a?b=c", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer x")
		req.Header.Set("X-Custom", "1")
		before, err := httputil.DumpRequest(req, false)
		require.NoError(t, err)
		hdr := req.Header.Clone()
		for range 3 {
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			drain(resp)
		}
		after, err := httputil.DumpRequest(req, false)
		require.NoError(t, err)
		assert.Equal(t, string(before), string(after))
		assert.Equal(t, hdr, req.Header)
	})
}

func TestRequestBodyClosedExactlyOnce(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, req *http.Request) error
	}{
		{"success", func(t *testing.T, req *http.Request) error {
			resp, err := New(&stubRT{}).RoundTrip(req)
			drain(resp)
			return err
		}},
		{"base error", func(t *testing.T, req *http.Request) error {
			_, err := New(&stubRT{err: errBase}, WithMaxInFlight(1)).RoundTrip(req)
			if !errors.Is(err, errBase) {
				return fmt.Errorf("want base error, got %v", err)
			}
			return nil
		}},
		{"cost too large", func(t *testing.T, req *http.Request) error {
			tr := New(&stubRT{}, WithLimit(PerSecond(1)))
			_, err := tr.RoundTrip(req.WithContext(WithCost(req.Context(), 2)))
			return wantErr(err, ErrCostTooLarge)
		}},
		{"invalid cost", func(t *testing.T, req *http.Request) error {
			_, err := New(&stubRT{}).RoundTrip(req.WithContext(WithCost(req.Context(), -2)))
			return wantErr(err, ErrInvalidCost)
		}},
		{"queue full", func(t *testing.T, req *http.Request) error {
			tr := New(&stubRT{}, WithLimit(PerSecond(1)), WithQueue(QueueOptions{MaxLen: -1}))
			drainRT(tr, mustReq(t, req.URL.String()))
			_, err := tr.RoundTrip(req)
			return wantErr(err, ErrQueueFull)
		}},
		{"deadline too short", func(t *testing.T, req *http.Request) error {
			tr := New(&stubRT{}, WithLimit(PerSecond(1)))
			drainRT(tr, mustReq(t, req.URL.String()))
			ctx, cancel := context.WithTimeout(req.Context(), time.Millisecond)
			defer cancel()
			_, err := tr.RoundTrip(req.WithContext(ctx))
			return wantErr(err, context.DeadlineExceeded)
		}},
		{"cancelled while waiting", func(t *testing.T, req *http.Request) error {
			tr := New(&stubRT{}, WithLimit(PerSecond(1)))
			drainRT(tr, mustReq(t, req.URL.String()))
			ctx, cancel := context.WithCancel(req.Context())
			time.AfterFunc(100*time.Millisecond, cancel)
			_, err := tr.RoundTrip(req.WithContext(ctx))
			return wantErr(err, context.Canceled)
		}},
		{"max wait expired", func(t *testing.T, req *http.Request) error {
			tr := New(&stubRT{}, WithMaxInFlight(1), WithQueue(QueueOptions{MaxWait: time.Second}))
			resp, err := tr.RoundTrip(mustReq(t, req.URL.String()))
			if err != nil {
				return err
			}
			defer drain(resp)
			_, err = tr.RoundTrip(req)
			return wantErr(err, ErrWaitTooLong)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				req, body := newBodyReq(t, "http://api.test/")
				require.NoError(t, c.run(t, req))
				assert.EqualValues(t, 1, body.closes.Load())
			})
		})
	}
}

func drainRT(tr http.RoundTripper, req *http.Request) {
	resp, err := tr.RoundTrip(req)
	if err == nil {
		drain(resp)
	}
}

func wantErr(err, target error) error {
	if !errors.Is(err, target) {
		return fmt.Errorf("want %v, got %v", target, err)
	}
	return nil
}

func TestIdleKeysAreEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(&stubRT{}, WithLimit(PerSecond(100)), WithKey(KeyByPath))
		for i := range 100_000 {
			drainRT(tr, mustReq(t, fmt.Sprintf("http://api.test/%d", i)))
			if i%1000 == 0 {
				time.Sleep(time.Second) // every key so far is idle again
			}
		}
		assert.Less(t, tr.keys.len(), 5_000)
	})
}

func TestBusyKeysAreNotEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		tr := New(stub, WithLimit(Every(time.Hour)), WithKey(KeyByPath))
		for i := range 10_000 {
			drainRT(tr, mustReq(t, fmt.Sprintf("http://api.test/%d", i)))
		}
		// Every key has spent its hour: none may be forgotten, or its next
		// request would leave at once.
		assert.Equal(t, 10_000, tr.keys.len())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := tr.RoundTrip(mustReq(t, "http://api.test/7").WithContext(ctx))
		assert.ErrorIs(t, err, ErrWaitTooLong)
	})
}

func TestNilBaseIsDefaultTransport(t *testing.T) {
	assert.Equal(t, http.DefaultTransport, New(nil).base)
}

func TestInvalidLimitPanics(t *testing.T) {
	for _, l := range []Limit{{}, {Count: 1}, {Period: time.Second}, PerSecond(1).WithBurst(-1), Every(time.Hour).WithBurst(1 << 40)} {
		assert.Panics(t, func() { New(nil, WithLimit(l)) }, "%#v", l)
	}
}
