package headway

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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
		tr := New(rt, WithMaxInFlight(1))
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
		assert.Equal(t, Stats{Throttled: 1, Retries: 1}, tr.Stats())
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
		tr := New(rt, WithLimit(PerSecond(100)), WithMaxRetryAfter(time.Minute))
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
		tr := New(rt, WithLimit(PerSecond(100)), WithThrottleAttempts(3))
		resp := get(t, tr, "http://api.test/")
		assert.Equal(t, 429, resp.StatusCode)
		log := rt.log()
		require.Len(t, log, 3)
		assert.Equal(t, []time.Duration{0, time.Second, 2 * time.Second}, []time.Duration{log[0].at, log[1].at, log[2].at})
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
		tr := New(rt, WithKey(KeyByPath), WithLimit(PerSecond(100)), WithThrottleAttempts(1))
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
		tr := New(rt, WithLimit(PerSecond(100)))
		body := &closeCounter{Reader: strings.NewReader("once")}
		req, err := http.NewRequest(http.MethodPost, "http://api.test/", body)
		require.NoError(t, err)
		req.GetBody = nil
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		drain(resp)
		assert.Equal(t, 429, resp.StatusCode)
		assert.Len(t, rt.log(), 1)
		assert.EqualValues(t, 1, body.closes.Load())

		// With GetBody it is sent again, each time with a fresh body.
		req, err = http.NewRequest(http.MethodPost, "http://api.test/", strings.NewReader("again"))
		require.NoError(t, err)
		resp, err = tr.RoundTrip(req)
		require.NoError(t, err)
		drain(resp)
		assert.Len(t, rt.log(), 1+DefaultThrottleAttempts)
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

// sendAllOK sends n GETs from g goroutines until each gets a 200.
func sendAllOK(t *testing.T, tr http.RoundTripper, url string, n, g int) {
	var wg sync.WaitGroup
	jobs := make(chan int)
	for range g {
		wg.Go(func() {
			for range jobs {
				for {
					resp, err := tr.RoundTrip(mustReq(t, url))
					if !assert.NoError(t, err) || resp.StatusCode == 200 {
						drain(resp)
						break
					}
					drain(resp)
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

func readCloser(s string) nopCloser { return nopCloser{strings.NewReader(s)} }
