package headway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/ratelimitheader"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// adaptRT answers with what its script says, and records when each
// request was sent and to which path.
type adaptRT struct {
	mu     sync.Mutex
	n      int
	sent   []adaptSent
	script func(n int, req *http.Request) (status int, header http.Header)
}

type adaptSent struct {
	at   time.Duration
	path string
}

func (s *adaptRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	s.mu.Lock()
	s.n++
	n := s.n
	s.sent = append(s.sent, adaptSent{at: time.Since(synctestEpoch), path: req.URL.Path})
	s.mu.Unlock()
	status, h := s.script(n, req)
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: req}, nil
}

func (s *adaptRT) log() []adaptSent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]adaptSent(nil), s.sent...)
}

// synctestEpoch is the start of every synctest bubble's clock.
var synctestEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func get(t *testing.T, tr http.RoundTripper, url string) *http.Response {
	t.Helper()
	resp, err := tr.RoundTrip(mustReq(t, url))
	require.NoError(t, err)
	drain(resp)
	return resp
}

func TestAThrottlePausesTheKeyAndTheThrottledRequestGoesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &adaptRT{script: func(n int, _ *http.Request) (int, http.Header) {
			if n == 2 {
				return 429, hdr("Retry-After", "2")
			}
			return 200, nil
		}}
		var hc hookCounts
		tr := New(rt, WithMaxInFlight(1), hc.option())
		get(t, tr, "http://api.test/first")
		var wg sync.WaitGroup
		wg.Go(func() { assert.Equal(t, 200, get(t, tr, "http://api.test/throttled").StatusCode) })
		synctest.Wait()
		for _, p := range []string{"/a", "/b", "/c"} {
			wg.Go(func() { assert.Equal(t, 200, get(t, tr, "http://api.test"+p).StatusCode) })
			synctest.Wait()
		}
		wg.Wait()
		log := rt.log()
		require.Len(t, log, 6)
		assert.Equal(t, adaptSent{0, "/throttled"}, log[1])
		// Nothing left during the pause, and the throttled request went
		// again first, ahead of the three that queued behind it; they
		// follow in order, at the pace the throttle taught.
		assert.Equal(t, adaptSent{2 * time.Second, "/throttled"}, log[2])
		for i, s := range log[3:] {
			assert.Equal(t, []string{"/a", "/b", "/c"}[i], s.path)
			assert.GreaterOrEqual(t, s.at, log[2+i].at, s.path)
		}
		assert.EqualValues(t, 1, hc.throttled.Load(), "throttled")
		assert.EqualValues(t, 1, hc.retries.Load(), "retried")
	})
}

func TestAWaitTooLongHandsTheResponseBackAndKeepsTheKeyPaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &adaptRT{script: func(n int, _ *http.Request) (int, http.Header) {
			if n == 1 {
				return 429, hdr("Retry-After", "3600")
			}
			return 200, nil
		}}
		tr := New(rt, WithLimit(PerSecond(100)), WithMaxServerWait(time.Minute))
		start := time.Now()
		resp := get(t, tr, "http://api.test/")
		assert.Equal(t, 429, resp.StatusCode, "a final 429 is a response")
		assert.Zero(t, time.Since(start))

		// The key stays paused for everybody else: a request that cannot
		// wait an hour fails at once.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := tr.RoundTrip(mustReq(t, "http://api.test/").WithContext(ctx))
		var we *WaitError
		require.ErrorAs(t, err, &we)
		assert.Equal(t, time.Hour, we.Wait)
		assert.Len(t, rt.log(), 1)
	})
}

func TestAWaitPastTheDeadlineHandsTheResponseBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &adaptRT{script: func(int, *http.Request) (int, http.Header) {
			return 429, hdr("Retry-After", "5")
		}}
		tr := New(rt, WithLimit(PerSecond(100)))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/").WithContext(ctx))
		require.NoError(t, err)
		drain(resp)
		assert.Equal(t, 429, resp.StatusCode)
		assert.Zero(t, time.Since(start))
	})
}

func TestGivingUpAfterTheThrottleAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &adaptRT{script: func(int, *http.Request) (int, http.Header) {
			return 429, hdr("Retry-After", "1")
		}}
		tr := New(rt, WithLimit(PerSecond(100)), WithRetry(RetryOptions{MaxAttempts: 3}))
		resp := get(t, tr, "http://api.test/")
		assert.Equal(t, 429, resp.StatusCode)
		log := rt.log()
		require.Len(t, log, 3)
		// The second throttle in a row doubles the pause (see strikes):
		// a server that keeps refusing may be restarting a block.
		assert.Equal(t, []time.Duration{0, time.Second, 3 * time.Second}, []time.Duration{log[0].at, log[1].at, log[2].at})
	})
}

func TestAGlobalScopePausesEveryKeyOfTheHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &adaptRT{script: func(n int, req *http.Request) (int, http.Header) {
			if n == 1 {
				return 429, hdr("Retry-After", "3", "X-Ratelimit-Global", "true")
			}
			return 200, nil
		}}
		tr := New(rt, WithKey(KeyByPath), WithLimit(PerSecond(100)), WithRetry(RetryOptions{MaxAttempts: 1}))
		assert.Equal(t, 429, get(t, tr, "http://api.test/a").StatusCode)
		get(t, tr, "http://api.test/b")
		get(t, tr, "http://other.test/c")
		log := rt.log()
		assert.Equal(t, 3*time.Second, log[1].at, "another key of the host waits")
		assert.Equal(t, 3*time.Second, log[2].at-log[1].at+3*time.Second, "another host does not")
	})
}

func TestQuotaSaidToBeSpentHoldsTheKeyUntilItResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &adaptRT{script: func(n int, _ *http.Request) (int, http.Header) {
			if n == 1 {
				return 200, hdr("RateLimit", `"default";r=0;t=5`)
			}
			return 200, hdr("RateLimit", `"default";r=9;t=5`)
		}}
		tr := New(rt)
		get(t, tr, "http://api.test/")
		get(t, tr, "http://api.test/")
		get(t, tr, "http://api.test/")
		log := rt.log()
		assert.Equal(t, []time.Duration{0, 5 * time.Second, 5 * time.Second}, []time.Duration{log[0].at, log[1].at, log[2].at})
	})
}

func TestARequestThatCannotBeReplayedIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &adaptRT{script: func(int, *http.Request) (int, http.Header) {
			return 429, hdr("Retry-After", "1")
		}}
		tr := New(rt, WithLimit(PerSecond(100)), WithRetry(RetryOptions{MaxBufferedBody: 3}))
		body := &closeCounter{Reader: strings.NewReader("once")} // above the buffer
		req, err := http.NewRequest(http.MethodPost, "http://api.test/", body)
		require.NoError(t, err)
		req.GetBody = nil
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		drain(resp)
		assert.Equal(t, 429, resp.StatusCode)
		assert.Len(t, rt.log(), 1)
		assert.EqualValues(t, 1, body.closes.Load())

		// A body that fits the buffer is sent again, and so is one with
		// GetBody, each time with a fresh body.
		body = &closeCounter{Reader: strings.NewReader("ok")}
		req, err = http.NewRequest(http.MethodPost, "http://api.test/", body)
		require.NoError(t, err)
		req.GetBody = nil
		resp, err = tr.RoundTrip(req)
		require.NoError(t, err)
		drain(resp)
		assert.Len(t, rt.log(), 1+defaultMaxAttempts)
		assert.EqualValues(t, 1, body.closes.Load())

		req, err = http.NewRequest(http.MethodPost, "http://api.test/", strings.NewReader("again"))
		require.NoError(t, err)
		resp, err = tr.RoundTrip(req)
		require.NoError(t, err)
		drain(resp)
		assert.Len(t, rt.log(), 1+2*defaultMaxAttempts)
	})
}

func TestABillingErrorIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &adaptRT{script: func(int, *http.Request) (int, http.Header) {
			return 429, nil
		}}
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, _ := rt.RoundTrip(req)
			resp.Body = readCloser(`{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}`)
			return resp, nil
		})
		tr := New(base, WithLimit(PerSecond(100)))
		resp := get(t, tr, "http://api.test/")
		assert.Equal(t, 429, resp.StatusCode)
		assert.Len(t, rt.log(), 1)
	})
}

func TestBareThrottlesSlowTheKeyDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A server that takes one request every 100 ms and says nothing
		// else but 429.
		var mu sync.Mutex
		var next time.Time
		rt := &adaptRT{script: func(int, *http.Request) (int, http.Header) {
			mu.Lock()
			defer mu.Unlock()
			if now := time.Now(); !now.Before(next) {
				next = now.Add(100 * time.Millisecond)
				return 200, nil
			}
			return 429, nil
		}}
		tr := New(rt)
		start := time.Now()
		sendAllOK(t, tr, "http://api.test/", 200, 8)
		total := len(rt.log())
		// Without adapting, 8 workers would send thousands of requests in
		// the time 200 take; the cut pace keeps the 429s to a fraction.
		assert.Less(t, total, 400, "requests sent for 200 admitted")
		// 200 take at least 20 s; the cubic probing costs some of that.
		assert.Less(t, time.Since(start), 40*time.Second)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

func readCloser(s string) nopCloser { return nopCloser{strings.NewReader(s)} }

func TestRateBounds(t *testing.T) {
	const perSec = 1e-9 // requests per nanosecond in one request a second
	for _, c := range []struct {
		name           string
		cap, left      float64
		reset          time.Duration
		coarse         bool
		wantLo, wantHi float64 // requests per second; hi 0: none
	}{
		{"ms: empty bucket of 10 full in 200ms", 10, 0, 200 * time.Millisecond, false, 9 / 0.201, 10 / 0.199},
		{"ms: one short", 10, 9, 20 * time.Millisecond, false, 0, 1 / 0.019},
		// Coarse: a second of rounding and a quarter for the clock and the flight.
		{"s: whole second says little", 10, 0, time.Second, true, 9 / 2.25, 0},
		{"s: a long window", 5000, 1000, 100 * time.Second, true, 3999 / 101.25, 4000 / 98.75},
	} {
		t.Run(c.name, func(t *testing.T) {
			lo, hi := rateBounds(c.cap, c.left, c.reset, c.coarse)
			assert.InDelta(t, c.wantLo, lo/perSec, 1e-6)
			assert.InDelta(t, c.wantHi, hi/perSec, 1e-6)
		})
	}
}

// A step table for the server model: departures (take), responses
// (observe), and what the model then expects to be left.
func TestServerModelSyncsPerDeparture(t *testing.T) {
	ms := int64(time.Millisecond)
	rate := &ratelimitheader.Signal{Limit: 50, Period: time.Second} // a stated 50/s
	sig := func(left int64, throttled bool) *ratelimitheader.Signal {
		s := *rate
		s.HasRemaining, s.Remaining, s.Throttled = true, left, throttled
		return &s
	}
	var m serverModel
	steps := []struct {
		name  string
		do    func()
		at    int64
		level float64
	}{
		{"probe leaves", func() { m.take(0, 1) }, 0, 0},
		{"its answer: 9 left", func() { m.observe(8*ms, 1, 1, sig(9, false)) }, 8 * ms, 9},
		// A group of three at one instant: each expects the level after
		// all three.
		{"three leave at once", func() { m.take(8*ms, 2); m.take(8*ms, 3); m.take(8*ms, 4) }, 8 * ms, 6},
		// The server counted #4 first: 8 left after it, above the group's
		// prediction, which is no news.
		{"#4 answers 8", func() { m.observe(13*ms, 4, 4, sig(8, false)) }, 8 * ms, 6},
		{"#2 answers 6", func() { m.observe(14*ms, 2, 4, sig(6, false)) }, 8 * ms, 6},
		// Below the prediction is news: the model goes down by it (the
		// refill since stays), and so does every prediction since.
		{"#3 answers 5", func() { m.observe(15*ms, 3, 4, sig(5, false)) }, 15 * ms, 5 + 0.007*50},
		{"one alone", func() { m.take(20*ms, 5) }, 20 * ms, 4 + 0.012*50},
		// Alone, an answer above the prediction lifts the model.
		{"#5 answers 6", func() { m.observe(25*ms, 5, 5, sig(6, false)) }, 25 * ms, 6 + 0.005*50},
		// A throttle gives back the token the model spent on it, and the
		// server's 0 then corrects the rest.
		{"one more alone", func() { m.take(30*ms, 6) }, 30 * ms, 5 + 0.010*50},
		{"#6 is throttled with 0 left", func() { m.observe(35*ms, 6, 6, sig(0, true)) }, 35 * ms, 0 + 0.005*50},
	}
	for _, s := range steps {
		s.do()
		assert.InDelta(t, s.level, m.level(s.at), 1e-9, s.name)
	}
}

// An unstated rate is learned from the corrections: a model that refills
// too slowly is corrected upwards, and the sum of the corrections over a
// span re-estimates the rate.
func TestServerModelMeasuresAnUnstatedRate(t *testing.T) {
	const trueRate = 50.0 // per second, unknown to the model
	var m serverModel
	level := 5.0 // the server's bucket, cap 10
	m.cap = 10
	interval := int64(20 * time.Millisecond) // the client sends at 50/s
	now := int64(0)
	for seq := uint64(1); seq <= 200; seq++ {
		level = min(10, level+trueRate*float64(interval)/1e9) - 1
		m.take(now, seq)
		m.observe(now+int64(5*time.Millisecond), seq, seq, &ratelimitheader.Signal{HasRemaining: true, Remaining: int64(level)})
		now += interval
	}
	assert.InDelta(t, trueRate, m.rate*1e9, 5)
}

func TestAIMDStep(t *testing.T) {
	s := int64(time.Second)
	var a aimd
	// A first throttled burst of 34: its rate says nothing; slow start.
	a.throttled(0, 5, 34, 0, 0, false, false)
	assert.True(t, a.slow)
	assert.Equal(t, 33.0, a.c.burst)
	assert.InDelta(t, 34*aimdBeta, a.at(0), 1e-9)
	assert.InDelta(t, 34*aimdBeta*2, a.at(s), 1e-9)
	// Another of the same burst changes nothing but the bucket's size.
	a.throttled(0, 7, 34, 0, 0, false, false)
	assert.Equal(t, 32.0, a.c.burst)
	// A paced request throttled 1.5 s after a pause: 107 left in the span,
	// 32 of them the refilled bucket: 50 a second.
	a.throttled(3*s, 100, 141, 107, 1.5, true, true)
	assert.False(t, a.slow)
	assert.InDelta(t, 50, a.wmax, 1e-9)
	assert.InDelta(t, 50*aimdBeta, a.at(3*s), 1e-9)
	// The cubic is back at the rate of the cut after K, and climbs past it.
	assert.InDelta(t, 50, a.at(3*s+int64(aimdK)), 1e-9)
	assert.Greater(t, a.at(3*s+2*int64(aimdK)), 50.0)
}

func TestSpreadPacesWhatRemainsEvenly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A fixed window of 10 requests per 10 s, 9 left after the first.
		start := time.Now()
		var mu sync.Mutex
		used := 0
		rt := &adaptRT{script: func(int, *http.Request) (int, http.Header) {
			mu.Lock()
			defer mu.Unlock()
			used++
			reset := 10 - int(time.Since(start)/time.Second)
			return 200, hdr("RateLimit-Policy", `"w";q=10;w=10`, "RateLimit", fmt.Sprintf(`"w";r=%d;t=%d`, max(10-used, 0), reset))
		}}
		spread := New(rt, WithSpread())
		sendAll(t, spread, "http://api.test/", 10, 4)
		log := rt.log()
		require.Len(t, log, 10)
		for i := 2; i < len(log); i++ {
			assert.GreaterOrEqual(t, log[i].at-log[i-1].at, 900*time.Millisecond, "request %d", i)
		}
		assert.Less(t, log[9].at, 10*time.Second, "all of the window's quota within the window")

		// By default what remains is spent at once.
		mu.Lock()
		used, start = 0, time.Now()
		mu.Unlock()
		rt.sent = nil
		sendAll(t, New(rt), "http://api.test/", 10, 4)
		log = rt.log()
		require.Len(t, log, 10)
		// (one is kept in reserve against jitter while the refill is 1/s)
		assert.Zero(t, log[8].at-log[0].at)
	})
}

func TestASlowFirstAnswerHoldsTheOthersOneSecondAtMost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		stub.onRound = func(*http.Request) {
			if stub.count() == 1 {
				time.Sleep(30 * time.Second) // a long first call
			}
		}
		tr := New(stub) // no limit: the key first waits for an answer
		start := time.Now()
		sendAll(t, tr, "http://api.test/", 5, 5)
		got := offsets(start, stub.times())
		assert.Equal(t, []time.Duration{0, time.Second, time.Second, time.Second, time.Second}, got)
	})
}
