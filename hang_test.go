package headway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
	"github.com/stretchr/testify/assert"
)

// hangRT passes requests to base, but for those sent within one of its
// windows (from its start): it accepts them and never answers, until the
// caller gives up or the window ends, when the connection is reset.
type hangRT struct {
	base    http.RoundTripper
	start   time.Time
	windows [][2]time.Duration
	// answers: within a window, answers[0] of every answers[1] requests
	// are answered all the same (a host that hangs some requests, or
	// most); {0, 0}: none.
	answers [2]int

	mu   sync.Mutex
	n    int             // requests sent into a window, answered or not
	sent []time.Duration // when each request was sent, from start
	hung int             // requests sent into a window
}

var errHangReset = errors.New("hangRT: connection reset at the hang's end")

func (h *hangRT) RoundTrip(req *http.Request) (*http.Response, error) {
	at := time.Since(h.start)
	h.mu.Lock()
	h.sent = append(h.sent, at)
	end, hangs := time.Duration(0), false
	for _, w := range h.windows {
		if at >= w[0] && at < w[1] {
			h.n++
			if h.answers[1] == 0 || h.n%h.answers[1] >= h.answers[0] {
				end, hangs = w[1], true
				h.hung++
			}
		}
	}
	h.mu.Unlock()
	if !hangs {
		return h.base.RoundTrip(req)
	}
	if req.Body != nil {
		req.Body.Close()
	}
	tm := time.NewTimer(end - at)
	defer tm.Stop()
	select {
	case <-req.Context().Done():
		return nil, req.Context().Err()
	case <-tm.C:
		return nil, errHangReset
	}
}

// delayedRT answers each request 200 after delay(req), or with its
// context's error if its caller gives up first.
func delayedRT(delay func(*http.Request) time.Duration) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		tm := time.NewTimer(delay(req))
		defer tm.Stop()
		select {
		case <-tm.C:
			return (&stubRT{status: 200}).RoundTrip(req)
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	})
}

// slowRouteRT answers / after 5 ms, and /slow only when its caller gives
// up, counting the requests for /slow in n, if not nil.
func slowRouteRT(n *atomic.Int64) http.RoundTripper {
	return delayedRT(func(req *http.Request) time.Duration {
		if req.URL.Path != "/slow" {
			return 5 * time.Millisecond
		}
		if n != nil {
			n.Add(1)
		}
		return time.Hour
	})
}

// perWindow returns the requests sent in each span of width from start,
// up to until.
func (h *hangRT) perWindow(width, until time.Duration) []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]int, (until+width-1)/width)
	for _, s := range h.sent {
		if i := int(s / width); i < len(out) {
			out[i]++
		}
	}
	return out
}

func (h *hangRT) hungN() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hung
}

// hangRun is a batch job of workers goroutines that each send GETs one
// after the other through tr for the span run, each request with a
// deadline of timeout (none when 0), until it gets a 200. It returns the
// 200s.
func hangRun(tr http.RoundTripper, workers int, timeout, run time.Duration) (ok int64) {
	var n atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				rctx, rcancel := ctx, context.CancelFunc(func() {})
				if timeout > 0 {
					rctx, rcancel = context.WithTimeout(ctx, timeout)
				}
				req, _ := http.NewRequestWithContext(rctx, http.MethodGet, "http://api.test/", nil)
				resp, err := tr.RoundTrip(req)
				if err == nil {
					drain(resp)
					if resp.StatusCode == http.StatusOK {
						n.Add(1)
					}
				} else if rctx.Err() == nil && ctx.Err() == nil {
					// Failed at once (a *WaitError): not a busy loop.
					time.Sleep(10 * time.Millisecond)
				}
				rcancel()
			}
		})
	}
	wg.Wait()
	return n.Load()
}

// hangScenario runs hangRun against a fake server behind a hangRT of
// windows, through New(hangRT, opts...).
func hangScenario(t *testing.T, windows [][2]time.Duration, workers int, timeout, run time.Duration, opts ...Option) (h *hangRT, ok int64) {
	srv := fakeserver.New(fakeserver.Config{Limit: 10000, Burst: 10000,
		Faults: fakeserver.Faults{Latency: 5 * time.Millisecond}})
	h = &hangRT{base: srv.Transport(), start: time.Now(), windows: windows}
	tr := New(h, opts...)
	ok = hangRun(tr, workers, timeout, run)
	return h, ok
}

// TestHangScenarios logs what a batch of 64 workers sends into a host that
// hangs (hung), what it got answered (ok) and what it sent when, in
// virtual time; it asserts nothing. Before callers that give up on a
// silent host counted as its failures, and after:
//
//	one hang of 6 s, 2 s deadlines:   hung 192, ok 71065; hung 67, ok 70274
//	hang 3 s, back 1 s, hang 3 s:     hung 256, ok 71491; hung 132, ok 66371
//	one hang of 6 s, no deadline:     hung 64, ok 71039; the same
//
// Then before and after the rule for a host that hangs some requests and
// answers the others (see keyState.hungOften), with its 3 probes in a row:
//
//	one hang of 6 s, 2 s deadlines:   hung 67, ok 70274; hung 67, ok 70148
//	hang 3 s, back 1 s, hang 3 s:     hung 132, ok 66371; hung 132, ok 66119
//	answers 1 in 10, for 10 s:        hung 320, ok 71118; hung 99, ok 70158
//	answers 1 in 2:                   hung 320, ok 71367; hung 128, ok 70212
//	answers 9 in 10:                  hung 320, ok 73946; the same
//	answers 1 in 10, 4 workers:       hung 9, ok 4394; hung 9, ok 4388
//	one hang of 6 s, no deadline:     hung 64, ok 71049; the same
//
// A host that answers 9 in 10 is not failing: its callers wait for the
// tenth, and its probes would be answered. The probes in a row cost a
// host that is back two round trips (ok: 126 fewer of 70000). Without a
// deadline, the workers wait out the hang in flight.
func TestHangScenarios(t *testing.T) {
	t.Run("one hang, 2s deadlines", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, ok := hangScenario(t, [][2]time.Duration{{2 * time.Second, 8 * time.Second}}, 64, 2*time.Second, 12*time.Second)
			t.Logf("hung %d, ok %d, per second %v", h.hungN(), ok, h.perWindow(time.Second, 12*time.Second))
		})
	})
	t.Run("hang, back, hang, 2s deadlines", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, ok := hangScenario(t, [][2]time.Duration{{2 * time.Second, 5 * time.Second}, {6 * time.Second, 9 * time.Second}}, 64, 2*time.Second, 12*time.Second)
			t.Logf("hung %d, ok %d, per second %v", h.hungN(), ok, h.perWindow(time.Second, 12*time.Second))
		})
	})
	for _, c := range []struct{ answers, of, workers int }{{1, 10, 64}, {1, 2, 64}, {9, 10, 64}, {1, 10, 4}} {
		t.Run(fmt.Sprintf("a hang that answers %d in %d, %d workers, 2s deadlines", c.answers, c.of, c.workers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fakeserver.New(fakeserver.Config{Limit: 10000, Burst: 10000,
					Faults: fakeserver.Faults{Latency: 5 * time.Millisecond}})
				h := &hangRT{base: srv.Transport(), start: time.Now(), windows: [][2]time.Duration{{2 * time.Second, 12 * time.Second}}, answers: [2]int{c.answers, c.of}}
				ok := hangRun(New(h), c.workers, 2*time.Second, 16*time.Second)
				t.Logf("hung %d, ok %d, per 2 s %v", h.hungN(), ok, h.perWindow(2*time.Second, 16*time.Second))
			})
		})
	}
	t.Run("one hang, no deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, ok := hangScenario(t, [][2]time.Duration{{2 * time.Second, 8 * time.Second}}, 64, 0, 12*time.Second)
			t.Logf("hung %d, ok %d, per second %v", h.hungN(), ok, h.perWindow(time.Second, 12*time.Second))
		})
	})
}

// outageLog returns a logger into buf and a function that counts the
// outages it logged.
func outageLog() (Option, func() int) {
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return WithLogger(log), func() int { return strings.Count(buf.String(), "headway: host down, probing") }
}

// TestAHostThatHangsIsProbedOnceItsCallersGiveUp: 64 workers, each request
// with a deadline of 2 s, meet a host that accepts and never answers for
// 6 s (the fake server's hang). The callers that give up on it, with no
// answer from the host since their requests left, show the host failing:
// the key goes into its outage state and sends one probe at a time until
// the host answers. Before, each caller's deadline was its own affair: a
// full flight of 64 went into the hang every 2 s (192 in all).
func TestAHostThatHangsIsProbedOnceItsCallersGiveUp(t *testing.T) {
	for _, logged := range []bool{false, true} { // the lean path, and the general one
		t.Run(fmt.Sprintf("logged %v", logged), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fakeserver.New(fakeserver.Config{Limit: 10000, Burst: 10000,
					Faults: fakeserver.Faults{Outage: fakeserver.OutageHang, Latency: 5 * time.Millisecond}})
				start := time.Now()
				srv.SetOutage(start.Add(2*time.Second), start.Add(8*time.Second))
				var opts []Option
				downs := func() int { return 0 }
				if logged {
					var log Option
					log, downs = outageLog()
					opts = append(opts, log)
				}
				tr := New(srv.Transport(), opts...)
				ok := hangRun(tr, 64, 2*time.Second, 12*time.Second)
				into := srv.Stats().Outage
				t.Logf("%d sent into the hang, %d answered in all", into, ok)
				// The flight out when the hang began; the request its
				// first caller to give up sends next, as the second to
				// give up shows the host failing; then probes at 4.2 s and
				// 6.6 s (200 ms, 400 ms after the failures at 4 s and 6.2
				// s), each hanging until its caller gives up.
				assert.LessOrEqual(t, into, int64(64+1+2))
				if logged {
					assert.Equal(t, 1, downs(), "one outage")
				}
				// Answered at full speed but for the hang and the wait for
				// the probe that finds the host back (at most 500 ms): 64
				// workers by 5 ms, 12800 a second, for 5.3 s at least.
				assert.Greater(t, ok, int64(5.3*12800))
			})
		})
	}
}

// TestAHangOpensTheBreaker: the callers that give up on a host that hangs
// count as failures on the key's breaker too, which opens.
func TestAHangOpensTheBreaker(t *testing.T) {
	for _, hold := range []bool{false, true} {
		t.Run(fmt.Sprintf("hold %v", hold), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var opened atomic.Int32
				h, ok := hangScenario(t, [][2]time.Duration{{2 * time.Second, 8 * time.Second}}, 64, 2*time.Second, 12*time.Second,
					WithBreaker(BreakerSettings{Hold: hold, Timeout: time.Second, OnStateChange: func(_ string, _, to BreakerState) {
						if to == BreakerOpen {
							opened.Add(1)
						}
					}}))
				t.Logf("hung %d, ok %d, per second %v, opened %d", h.hungN(), ok, h.perWindow(time.Second, 12*time.Second), opened.Load())
				assert.Positive(t, opened.Load(), "the breaker opened")
				assert.LessOrEqual(t, h.hungN(), 64+1+4)
				// The breaker's Timeout spaces the probes too: the host,
				// back at 8 s, is found by 9 s.
				assert.Greater(t, ok, int64(4.8*12800))
			})
		})
	}
}

// TestCallersThatGiveUpOnAHostThatAnswersDoNotTakeItDown: a caller's
// deadline is a failure of the host only when the host has been silent
// since the request left, for longer than a stall, and not for one request
// alone.
func TestCallersThatGiveUpOnAHostThatAnswersDoNotTakeItDown(t *testing.T) {
	// routeRT answers / after 5 ms, and /slow when its caller gives up.
	var slow atomic.Int64
	routeRT := slowRouteRT(&slow)
	get := func(tr http.RoundTripper, path string, timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test"+path, nil)
		resp, err := tr.RoundTrip(req)
		drain(resp)
		return err
	}
	t.Run("slow but steady", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Answers in 1.5 to 2.5 s, to callers that wait 2 s: half of
			// them give up, while the others are answered.
			srv := fakeserver.New(fakeserver.Config{Limit: 10000, Burst: 10000,
				Faults: fakeserver.Faults{Latency: 1500 * time.Millisecond, Jitter: time.Second}})
			log, downs := outageLog()
			var opened atomic.Int32
			tr := New(srv.Transport(), log, WithBreaker(BreakerSettings{OnStateChange: func(_ string, _, to BreakerState) {
				if to == BreakerOpen {
					opened.Add(1)
				}
			}}))
			ok := hangRun(tr, 64, 2*time.Second, 20*time.Second)
			total := srv.Stats().Total
			t.Logf("%d answered in time of %d sent", ok, total)
			assert.Greater(t, total-ok, total/4, "many callers gave up")
			assert.Zero(t, downs(), "no outage")
			assert.Zero(t, opened.Load(), "the breaker stayed closed")
		})
	})
	t.Run("one early cancel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			log, downs := outageLog()
			tr := New(routeRT, log)
			for range 10 {
				assert.NoError(t, get(tr, "/", time.Second)) // 5 ms answers
			}
			assert.Error(t, get(tr, "/slow", 3*time.Millisecond))
			start := time.Now()
			assert.NoError(t, get(tr, "/", time.Second))
			assert.Equal(t, 5*time.Millisecond, time.Since(start), "sent at once")
			assert.Zero(t, downs())
		})
	})
	t.Run("long calls, one at a time", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			log, downs := outageLog()
			tr := New(routeRT, log)
			assert.NoError(t, get(tr, "/", time.Second))
			for range 5 {
				assert.Error(t, get(tr, "/slow", 500*time.Millisecond))
			}
			assert.Zero(t, downs(), "a call its caller ends, alone, tells nothing of the host")
		})
	})
	t.Run("a short deadline while others are answered", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			slow.Store(0)
			log, downs := outageLog()
			tr := New(routeRT, log)
			assert.NoError(t, get(tr, "/", time.Second))
			var wg sync.WaitGroup
			stop := time.Now().Add(3 * time.Second)
			for range 8 {
				wg.Go(func() {
					for time.Now().Before(stop) {
						assert.NoError(t, get(tr, "/", time.Second))
					}
				})
			}
			for range 2 {
				wg.Go(func() {
					for time.Now().Before(stop) {
						var re *RetryError // sent, and given up on
						if err := get(tr, "/slow", 100*time.Millisecond); !assert.ErrorAs(t, err, &re) || !assert.ErrorIs(t, err, context.DeadlineExceeded) {
							return
						}
					}
				})
			}
			wg.Wait()
			assert.Zero(t, downs())
			assert.InDelta(t, 2*30, slow.Load(), 2, "every short call was sent")
		})
	})
}

// TestAHostThatHangsMostRequestsIsProbed: 64 workers, each request with a
// deadline of 2 s, meet a host that answers one request in 10 (or one in
// 2) and hangs the others for 10 s. Its answers end every silence, but the
// callers that give up on it, half of what the key sent or more, show it
// failing: the key goes into its outage state, its breaker counts them,
// and only probes go until three in a row are answered. Before, a flight
// of 64 went into the hang every 2 s (320 in all).
func TestAHostThatHangsMostRequestsIsProbed(t *testing.T) {
	for _, c := range []struct {
		answers, of int
		breaker     bool
		most        int // hung at most
	}{
		// The flight out when the hang began, the requests sent as the
		// first half of it gave up, then probes.
		{1, 10, false, 64 + 40 + 10},
		{1, 10, true, 64 + 40 + 10},
		// One in two is the least that is failing: the whole flight had
		// given up before it was, and sent again.
		{1, 2, false, 64 + 64 + 10},
	} {
		t.Run(fmt.Sprintf("%d in %d, breaker %v", c.answers, c.of, c.breaker), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log, downs := outageLog()
				var opened atomic.Int32
				opts := []Option{log}
				if c.breaker {
					opts = append(opts, WithBreaker(BreakerSettings{Timeout: time.Second, OnStateChange: func(_ string, _, to BreakerState) {
						if to == BreakerOpen {
							opened.Add(1)
						}
					}}))
				}
				srv := fakeserver.New(fakeserver.Config{Limit: 10000, Burst: 10000,
					Faults: fakeserver.Faults{Latency: 5 * time.Millisecond}})
				h := &hangRT{base: srv.Transport(), start: time.Now(), windows: [][2]time.Duration{{2 * time.Second, 12 * time.Second}}, answers: [2]int{c.answers, c.of}}
				ok := hangRun(New(h, opts...), 64, 2*time.Second, 16*time.Second)
				t.Logf("hung %d, ok %d, per 2 s %v, outages %d, opened %d", h.hungN(), ok, h.perWindow(2*time.Second, 16*time.Second), downs(), opened.Load())
				assert.LessOrEqual(t, h.hungN(), c.most)
				assert.Equal(t, 1, downs(), "one outage: an answered probe did not end it")
				if c.breaker {
					assert.Positive(t, opened.Load(), "the breaker opened")
				}
				// The host, back at 12 s, is found within a second, or
				// after the breaker's Timeout: the hang's end broke the
				// probe out.
				least := 2*12800 + 3*12800
				if c.breaker {
					least = 2*12800 + 2.5*12800
				}
				assert.Greater(t, ok, int64(least))
			})
		})
	}
}

// TestCallersThatGiveUpOnAHostThatAnswersMostDoNotTakeItDown: a host whose
// callers give up on fewer than half of a key's requests is not failing,
// however long they waited.
func TestCallersThatGiveUpOnAHostThatAnswersMostDoNotTakeItDown(t *testing.T) {
	t.Run("hangs one in 10", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			log, downs := outageLog()
			srv := fakeserver.New(fakeserver.Config{Limit: 10000, Burst: 10000,
				Faults: fakeserver.Faults{Latency: 5 * time.Millisecond}})
			// No end to the hang in the run: its end breaks the requests
			// out, a failure of the host.
			h := &hangRT{base: srv.Transport(), start: time.Now(), windows: [][2]time.Duration{{2 * time.Second, time.Minute}}, answers: [2]int{9, 10}}
			ok := hangRun(New(h, log), 64, 2*time.Second, 16*time.Second)
			t.Logf("hung %d, ok %d", h.hungN(), ok)
			assert.Zero(t, downs(), "no outage")
		})
	})
	// slowRT answers after 5 ms until 2 s, then after 1.5 to 2.5 s: a host
	// that turns slow, to callers that wait 2 s, whose usual latency takes
	// a while to learn it.
	slowRT := func(start time.Time, n *atomic.Int64) http.RoundTripper {
		return delayedRT(func(*http.Request) time.Duration {
			if time.Since(start) < 2*time.Second {
				return 5 * time.Millisecond
			}
			return 1500*time.Millisecond + time.Duration(n.Add(1)*7919%1000)*time.Millisecond
		})
	}
	t.Run("turns slow", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			log, downs := outageLog()
			var n atomic.Int64
			ok := hangRun(New(slowRT(time.Now(), &n), log), 64, 2*time.Second, 20*time.Second)
			t.Logf("ok %d of %d", ok, n.Load())
			assert.Zero(t, downs(), "no outage")
		})
	})
	// mixRT answers / after 5 ms, and /slow (a long poll, or a slow route)
	// when its caller gives up.
	mixRT := slowRouteRT(nil)
	loop := func(tr http.RoundTripper, path string, timeout time.Duration, stop time.Time) {
		for time.Now().Before(stop) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test"+path, nil)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				drain(resp)
			} else if ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
		}
	}
	t.Run("short deadlines on a slow route", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// 6 callers of a route that does not answer within their 100
			// ms, beside 8 of one that answers in 5 ms.
			log, downs := outageLog()
			tr := New(mixRT, log)
			stop := time.Now().Add(5 * time.Second)
			var wg sync.WaitGroup
			for i := range 14 {
				path := "/"
				if i < 6 {
					path = "/slow"
				}
				wg.Go(func() { loop(tr, path, 100*time.Millisecond, stop) })
			}
			wg.Wait()
			assert.Zero(t, downs(), "no outage")
		})
	})
	t.Run("long polls beside calls", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// 32 long polls that their callers end after 30 s, beside 2
			// callers of calls that take 5 ms.
			log, downs := outageLog()
			tr := New(mixRT, log)
			stop := time.Now().Add(2 * time.Minute)
			var wg sync.WaitGroup
			for i := range 34 {
				path, timeout := "/", time.Second
				if i < 32 {
					path, timeout = "/slow", 30*time.Second
				}
				wg.Go(func() { loop(tr, path, timeout, stop) })
			}
			wg.Wait()
			assert.Zero(t, downs(), "no outage")
		})
	})
}
