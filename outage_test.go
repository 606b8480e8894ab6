package headway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
	"github.com/headway-go/headway/ratelimitheader"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHostVerdict(t *testing.T) {
	resp := func(code int) *http.Response { return &http.Response{StatusCode: code} }
	thr := &ratelimitheader.Signal{Throttled: true, HasWait: true, Wait: time.Second, RetryAfter: true}
	rows := []struct {
		name   string
		resp   *http.Response
		err    error
		ctxErr error
		sig    *ratelimitheader.Signal
		want   outageVerdict
	}{
		{"200", resp(200), nil, nil, nil, hostUp},
		{"404", resp(404), nil, nil, nil, hostUp},
		{"429 is a throttle", resp(429), nil, nil, thr, hostUp},
		{"500", resp(500), nil, nil, nil, hostDown},
		{"501 refuses the request, not the load", resp(501), nil, nil, nil, hostUp},
		{"502", resp(502), nil, nil, nil, hostDown},
		{"bare 503 is an overload", resp(503), nil, nil, nil, hostDown},
		{"503 with Retry-After is a throttle", resp(503), nil, nil, thr, hostUp},
		{"bare 529 is an overload", resp(529), nil, nil, nil, hostDown},
		{"529 with Retry-After is a throttle", resp(529), nil, nil, thr, hostUp},
		{"504", resp(504), nil, nil, nil, hostDown},
		{"505", resp(505), nil, nil, nil, hostUp},
		{"reset", nil, errReset, nil, nil, hostDown},
		{"EOF", nil, errEOF, nil, nil, hostDown},
		{"a timeout of the transport", nil, fmt.Errorf("x: %w", context.DeadlineExceeded), nil, nil, hostDown},
		{"a transport's own timeout", nil, timeoutErr{}, nil, nil, hostDown},
		{"caller gave up", nil, context.Canceled, context.Canceled, nil, hostUnknown},
		{"a 500 after the caller gave up", resp(500), nil, context.Canceled, nil, hostUnknown},
	}
	for _, r := range rows {
		sig := r.sig
		if sig == nil {
			sig = &ratelimitheader.Signal{}
		}
		assert.Equal(t, r.want, hostVerdict(r.resp, r.err, r.ctxErr, sig), r.name)
	}
}

// timeoutErr is what net/http returns when ResponseHeaderTimeout passes.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "net/http: timeout awaiting response headers" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// watchRT passes requests to base and records when each one was sent, the
// most in flight at once while the server was down, and the answers.
type watchRT struct {
	base     http.RoundTripper
	downFrom time.Time
	downTo   time.Time

	mu       sync.Mutex
	sent     []time.Time
	inflight int
	peakDown int // the most in flight at once with one sent in the outage
}

func (w *watchRT) RoundTrip(req *http.Request) (*http.Response, error) {
	now := time.Now()
	w.mu.Lock()
	w.sent = append(w.sent, now)
	w.inflight++
	if !now.Before(w.downFrom) && now.Before(w.downTo) {
		w.peakDown = max(w.peakDown, w.inflight)
	}
	w.mu.Unlock()
	resp, err := w.base.RoundTrip(req)
	w.mu.Lock()
	w.inflight--
	w.mu.Unlock()
	return resp, err
}

func (w *watchRT) sentIn(from, to time.Time) []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Time
	for _, s := range w.sent {
		if !s.Before(from) && s.Before(to) {
			out = append(out, s)
		}
	}
	return out
}

// outageRun is the workload in virtual time: workers goroutines
// send n GETs, one after the other, through tr, to a server that admits
// rate requests a second; each request that fails is counted and not sent
// again.
func outageRun(t *testing.T, tr http.RoundTripper, n, workers int) (failed int64, errs []error) {
	var next, nfailed atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
				if err == nil {
					drain(resp)
				}
				if err != nil || resp.StatusCode != 200 {
					nfailed.Add(1)
					mu.Lock()
					if err == nil {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return nfailed.Load(), errs
}

// batchRetry is the retry configuration for batch work: 30 attempts
// on 429 and every 5xx that passes with time.
var batchRetry = RetryOptions{MaxAttempts: 30, Statuses: []int{429, 500, 502, 503, 504}}

// TestAnOutageHoldsTheKeyBehindOneProbe is the scenario in virtual
// time, in each of the outage's shapes: 8 workers, 600 GETs at 100 a
// second, 3 s of outage. Nothing fails, one request at a time goes out
// while the host is down, at most 8 reach it in all, and the queue resumes
// within one pacing interval of the probe that found the host back.
func TestAnOutageHoldsTheKeyBehindOneProbe(t *testing.T) {
	shapes := []struct {
		name  string
		shape fakeserver.OutageShape
	}{
		{"500s", fakeserver.OutageError},
		{"resets", fakeserver.OutageReset},
		{"hangs past the client's timeout", fakeserver.OutageHang},
		{"slower than the client's timeout", fakeserver.OutageSlow},
	}
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fakeserver.New(fakeserver.Config{Limit: 100, Burst: 10,
					Faults: fakeserver.Faults{Outage: sh.shape, Latency: 5 * time.Millisecond}})
				start := time.Now()
				from, to := start.Add(2*time.Second), start.Add(5*time.Second)
				srv.SetOutage(from, to)
				w := &watchRT{base: timeoutRT{srv.Transport(), 200 * time.Millisecond}, downFrom: from, downTo: to}
				tr := New(w, WithLimit(PerSecond(100).WithBurst(9)), WithRetry(batchRetry))
				failed, errs := outageRun(t, tr, 600, 8)
				took := time.Since(start)
				st := srv.Stats()
				assert.Zero(t, failed, "%v", errs)
				assert.LessOrEqual(t, st.Outage, int64(8), "requests sent into the outage")
				if sh.shape == fakeserver.OutageError || sh.shape == fakeserver.OutageReset {
					assert.Equal(t, 1, w.peakDown, "one request at a time while the host is down")
				} else {
					// A silent host is known only by its silence: the key
					// stops sending once its requests go unanswered for
					// twice their usual latency and more (a few at 10ms
					// intervals), then one at a time.
					assert.LessOrEqual(t, w.peakDown, 3, "one request at a time once the silence shows")
				}
				// The first request after the outage is a probe; the next
				// leaves within one pacing interval (10ms) of its answer.
				after := w.sentIn(to, to.Add(time.Hour))
				require.GreaterOrEqual(t, len(after), 2)
				assert.LessOrEqual(t, after[1].Sub(after[0]), 10*time.Millisecond+5*time.Millisecond, "latency of the probe plus one interval")
				// Least time: 3 s of outage, and 600 less two bursts at 100/s.
				least := 3*time.Second + (600-20)*10*time.Millisecond
				eff := least.Seconds() / took.Seconds()
				t.Logf("%s: took %v, efficiency %.3f, %d sent into the outage, first probe after it at +%v",
					sh.name, took, eff, st.Outage, after[0].Sub(to))
			})
		})
	}
}

// timeoutRT gives every attempt a timeout of its own, as
// http.Transport.ResponseHeaderTimeout does, and reports it as net/http
// does: an error whose Timeout() is true.
type timeoutRT struct {
	base http.RoundTripper
	d    time.Duration
}

func (r timeoutRT) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), r.d)
	defer cancel()
	resp, err := r.base.RoundTrip(req.Clone(ctx))
	if err != nil && ctx.Err() != nil && req.Context().Err() == nil {
		return nil, timeoutErr{}
	}
	if err == nil {
		// Read the body now: it must outlive this attempt's context.
		buffered := buffer(resp, 1<<20)
		if buffered == nil {
			drain(resp)
			return nil, timeoutErr{}
		}
		resp = buffered
	}
	return resp, err
}

func TestProbesBackOffFromTheFirstFailureUpToTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{Limit: 1000, Burst: 1000})
		start := time.Now()
		srv.SetOutage(start, start.Add(time.Hour))
		w := &watchRT{base: srv.Transport()}
		tr := New(w, WithRetry(RetryOptions{MaxAttempts: 1}))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// A steady stream of requests, each failing as it probes: the
		// probes are the requests the server sees.
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
					resp, err := tr.RoundTrip(req)
					if err != nil {
						return // cannot wait for the next probe: done
					}
					drain(resp)
				}
			})
		}
		wg.Wait()
		// The first requests went out together; the first failure came at
		// once, and then the probes, one at a time.
		probes := w.sentIn(start.Add(1), start.Add(time.Hour))
		require.Greater(t, len(probes), 10)
		// 200ms, doubling up to 500ms, each from the last failure, which
		// comes at once: not jittered, so that the host, once back, waits
		// 500ms at most for the probe that finds it.
		want, last := 200*time.Millisecond, start
		for i, p := range probes {
			assert.Equal(t, want, p.Sub(last), "gap %d", i)
			want, last = min(2*want, 500*time.Millisecond), p
		}
		assert.LessOrEqual(t, len(probes), 20*2+1, "one probe every 500ms at most")
	})
}

func TestARequestThatCannotWaitForTheNextProbeFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{Limit: 1000, Burst: 1000})
		start := time.Now()
		srv.SetOutage(start, start.Add(time.Hour))
		tr := New(srv.Transport(), WithRetry(RetryOptions{MaxAttempts: 1, ProbeInterval: time.Second}))
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
		require.NoError(t, err)
		drain(resp)
		assert.Equal(t, 500, resp.StatusCode)

		// The host is down: the next probe is between 0.5 s and 1.5 s away.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
		began := time.Now()
		_, err = tr.RoundTrip(req)
		assert.Zero(t, time.Since(began), "failed at once")
		var we *WaitError
		require.ErrorAs(t, err, &we)
		assert.ErrorIs(t, err, ErrWaitTooLong)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 100*time.Millisecond, we.Allowed)
		assert.Equal(t, we.NextProbe.Sub(began), we.Wait)
		assert.GreaterOrEqual(t, we.Wait, 500*time.Millisecond)
		assert.LessOrEqual(t, we.Wait, 1500*time.Millisecond)
		assert.Contains(t, err.Error(), "host down, next probe in")

		// MaxWait too.
		tr2 := New(srv.Transport(), WithRetry(RetryOptions{MaxAttempts: 1, ProbeInterval: time.Second}),
			WithQueue(QueueOptions{MaxWait: 200 * time.Millisecond}))
		resp, err = tr2.RoundTrip(mustReq(t, "http://api.test/"))
		require.NoError(t, err)
		drain(resp)
		_, err = tr2.RoundTrip(mustReq(t, "http://api.test/"))
		require.ErrorAs(t, err, &we)
		assert.False(t, we.NextProbe.IsZero())
		assert.EqualValues(t, 2, srv.Stats().Total, "neither was sent")
	})
}

func TestAWaiterWhoseDeadlineComesBeforeTheNextProbeFailsWhenItMoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Every answer is a 500; the second request (the first probe) waits
		// in the server until released.
		release := make(chan struct{})
		var n atomic.Int64
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if n.Add(1) == 2 {
				<-release
			}
			return (&stubRT{status: 500}).RoundTrip(req)
		})
		tr := New(base, WithRetry(RetryOptions{MaxAttempts: 1, ProbeInterval: time.Second, MaxProbeInterval: 8 * time.Second}))
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
		require.NoError(t, err)
		drain(resp)
		probeDone := make(chan struct{})
		go func() {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
			if err == nil {
				drain(resp)
			}
			close(probeDone)
		}()
		time.Sleep(2 * time.Second)
		synctest.Wait() // the probe is out
		require.EqualValues(t, 2, n.Load())

		// A request with 400ms to live queues behind the probe: the next
		// one may go as soon as the probe answers. The probe fails: the
		// next is at least a second away (2 s ± 50%), past its deadline,
		// so it fails then, not at its deadline.
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
			_, err := tr.RoundTrip(req)
			errc <- err
		}()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		close(release)
		<-probeDone
		released := time.Now()
		err = <-errc
		assert.Equal(t, released, time.Now(), "failed when the probe failed")
		var we *WaitError
		require.ErrorAs(t, err, &we)
		assert.False(t, we.NextProbe.IsZero())
		assert.GreaterOrEqual(t, we.Wait, time.Second)
		assert.Equal(t, 300*time.Millisecond, we.Allowed)
		assert.EqualValues(t, 2, n.Load(), "it was never sent")
	})
}

func TestStaleOutcomesDoNotMoveTheOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Request A is slow and succeeds; B, sent after it, fails at once:
		// the host is down. A's success, from before the outage, does not
		// end it.
		gate := &gateRT{release: make(chan struct{})}
		tr := New(gate, WithRetry(RetryOptions{MaxAttempts: 1, ProbeInterval: time.Second}))
		aDone := make(chan struct{})
		go func() {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/slow"))
			if err == nil {
				drain(resp)
			}
			close(aDone)
		}()
		synctest.Wait()
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/fail"))
		require.NoError(t, err)
		drain(resp)
		k := tr.keys.get("api.test", tr, mustReq(t, "http://api.test/"))
		require.True(t, k.isDown())
		close(gate.release)
		<-aDone
		assert.True(t, k.isDown(), "a success sent before the outage does not end it")

		// The next request is a probe, which succeeds: the host is up. A
		// failure of a request sent before that does not start another.
		time.Sleep(2 * time.Second)
		resp, err = tr.RoundTrip(mustReq(t, "http://api.test/"))
		require.NoError(t, err)
		drain(resp)
		assert.False(t, k.isDown())
		k.settle(&departure{seq: 1}, hostDown) // A's number: a late failure from before
		assert.False(t, k.isDown(), "a failure sent before the recovery does not start another outage")
	})
}

// gateRT answers /slow with a 200 once release is closed, /fail with a 500
// at once, and anything else with a 200 at once.
type gateRT struct{ release chan struct{} }

func (g *gateRT) RoundTrip(req *http.Request) (*http.Response, error) {
	status := 200
	switch req.URL.Path {
	case "/slow":
		<-g.release
	case "/fail":
		status = 500
	}
	return (&stubRT{status: status}).RoundTrip(req)
}

func TestBreakerFacesInAnOutage(t *testing.T) {
	run := func(t *testing.T, hold bool) (failed int64, errs []error, st fakeserver.Stats) {
		synctest.Test(t, func(t *testing.T) {
			srv := fakeserver.New(fakeserver.Config{Limit: 100, Burst: 10,
				Faults: fakeserver.Faults{Latency: 5 * time.Millisecond}})
			start := time.Now()
			srv.SetOutage(start.Add(time.Second), start.Add(4*time.Second))
			tr := New(srv.Transport(), WithLimit(PerSecond(100).WithBurst(9)), WithRetry(batchRetry),
				WithBreaker(BreakerSettings{Timeout: time.Second, Hold: hold}))
			failed, errs = outageRun(t, tr, 400, 8)
			st = srv.Stats()
		})
		return
	}
	t.Run("hold", func(t *testing.T) {
		failed, errs, st := run(t, true)
		assert.Zero(t, failed, "%v", errs)
		assert.LessOrEqual(t, st.Outage, int64(8))
		assert.EqualValues(t, 400, st.Admitted)
	})
	t.Run("fail fast", func(t *testing.T) {
		failed, errs, _ := run(t, false)
		assert.Positive(t, failed)
		open := 0
		for _, err := range errs {
			var coe *CircuitOpenError
			if errors.As(err, &coe) {
				open++
			}
		}
		assert.Positive(t, open, "the queued requests fail at once with *CircuitOpenError")
	})
}

func TestAHoldBreakerFailsAtOnceARequestThatCannotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{Limit: 1000, Burst: 1000})
		start := time.Now()
		srv.SetOutage(start, start.Add(time.Hour))
		tr := New(srv.Transport(), WithRetry(RetryOptions{MaxAttempts: 1}),
			WithBreaker(BreakerSettings{ConsecutiveFailures: 1, Timeout: 10 * time.Second, Hold: true}))
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
		require.NoError(t, err)
		drain(resp)
		// The breaker is open for 10 s; a request with 1 s to live fails
		// at once.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
		began := time.Now()
		_, err = tr.RoundTrip(req)
		var we *WaitError
		require.ErrorAs(t, err, &we, "%v", err)
		assert.Zero(t, time.Since(began))
		assert.Equal(t, start.Add(10*time.Second), we.NextProbe)
		assert.Equal(t, 10*time.Second, we.Wait)
		assert.EqualValues(t, 1, srv.Stats().Total)
	})
}

func TestOverloadIsRetriedLike503(t *testing.T) {
	// A POST is retried on a 529 that states its delay, after that delay.
	base := &stepRT{steps: []step{{status: 529, kv: []string{"Retry-After", "2"}}, {status: 200}}}
	synctest.Test(t, func(t *testing.T) {
		tr := New(base)
		start := time.Now()
		resp, err := tr.RoundTrip(mustPost(t))
		require.NoError(t, err)
		drain(resp)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, 2*time.Second, base.sent[1].Sub(start))
	})
	sig := ratelimitheader.Parse(&ratelimitheader.Input{Status: 529, Header: http.Header{"Retry-After": {"3"}}})
	assert.True(t, sig.Throttled && sig.HasWait && sig.RetryAfter)
	assert.Equal(t, 3*time.Second, sig.Wait)
	assert.Contains(t, defaultRetryStatuses(), 529)
}

func mustPost(t *testing.T) *http.Request {
	req, err := http.NewRequest(http.MethodPost, "http://api.test/", nil)
	require.NoError(t, err)
	return req
}

func TestABare529HoldsTheKeyAndA529WithRetryAfterPausesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{status: 529}
		var hc hookCounts
		tr := New(stub, WithRetry(RetryOptions{MaxAttempts: 1}), hc.option())
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
		require.NoError(t, err)
		drain(resp)
		k := tr.keys.get("api.test", tr, mustReq(t, "http://api.test/"))
		assert.True(t, k.isDown(), "a bare 529 is an overload: the host is down")
		assert.Zero(t, hc.throttled.Load(), "not a throttle: the key's pace is not cut")
	})
}

// A key without limits sends its first request alone and waits for its
// answer; when that answer is a failure, the requests waiting behind it
// stay held behind the probe instead of leaving all at once.
func TestAFailedFirstAnswerKeepsTheOthersWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{Limit: 1000, Burst: 100,
			Faults: fakeserver.Faults{Latency: time.Millisecond}})
		start := time.Now()
		srv.SetOutage(start, start.Add(time.Second))
		tr := New(srv.Transport(), WithRetry(batchRetry))
		failed, errs := outageRun(t, tr, 20, 20)
		assert.Zero(t, failed, "%v", errs)
		st := srv.Stats()
		assert.LessOrEqual(t, st.Outage, int64(8), "the first request, then probes")
		assert.EqualValues(t, 20, st.Admitted)
	})
}

// net/http's ResponseHeaderTimeout error matches context.DeadlineExceeded;
// with the request's own context alive, it is a timeout of the host: the
// request is retried, and the key probes.
func TestAResponseHeaderTimeoutIsRetriedAndHoldsTheKey(t *testing.T) {
	fs, err := fakeserver.Start(fakeserver.Config{Limit: 1000, Burst: 100,
		Faults: fakeserver.Faults{Outage: fakeserver.OutageHang}})
	require.NoError(t, err)
	defer fs.Close()
	now := time.Now()
	fs.Server.SetOutage(now, now.Add(500*time.Millisecond))
	base := &http.Transport{ResponseHeaderTimeout: 100 * time.Millisecond}
	defer base.CloseIdleConnections()
	tr := New(base, WithRetry(RetryOptions{MaxAttempts: 30}))
	resp, err := tr.RoundTrip(mustReq(t, fs.URL+"/"))
	require.NoError(t, err)
	drain(resp)
	assert.Equal(t, 200, resp.StatusCode)
	// One attempt at a time, each 100ms at least: a handful, whatever the
	// machine's load.
	assert.LessOrEqual(t, fs.Server.Stats().Outage, int64(6))
}

// One route of a host fails while the others answer: a success of a request
// sent after the failure ends the outage at once; the key is not held.
func TestASuccessSentAfterTheFailureEndsTheOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		brokenGo, slowGo := make(chan struct{}), make(chan struct{})
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			status := 200
			switch req.URL.Path {
			case "/broken":
				<-brokenGo
				status = 500
			case "/slow":
				<-slowGo
			}
			return (&stubRT{status: status}).RoundTrip(req)
		})
		tr := New(base, WithRetry(RetryOptions{MaxAttempts: 1}))
		send := func(path string) {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test"+path))
			if err == nil {
				drain(resp)
			}
		}
		send("/") // the key's first answer
		k := tr.keys.get("api.test", tr, mustReq(t, "http://api.test/"))
		var wg sync.WaitGroup
		wg.Go(func() { send("/broken") })
		synctest.Wait() // /broken is out
		wg.Go(func() { send("/slow") })
		synctest.Wait() // /slow is out, after it
		close(brokenGo)
		synctest.Wait()
		require.True(t, k.isDown(), "a 500 shows the host down")
		close(slowGo)
		wg.Wait()
		assert.False(t, k.isDown(), "/slow, sent after /broken, came back fine")
		// A request now leaves at once.
		start := time.Now()
		send("/")
		assert.Zero(t, time.Since(start))
	})
}

// An outage is logged at Info when it begins and when it ends, once each,
// with the key's hash and the host, never the key.
func TestAnOutageIsLoggedOnceWhenItBeginsAndEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
		srv := fakeserver.New(fakeserver.Config{Limit: 100, Burst: 10})
		start := time.Now()
		srv.SetOutage(start, start.Add(time.Second))
		tr := New(srv.Transport(), WithLogger(log), WithKey(KeyByHeader("Authorization")), WithRetry(batchRetry))
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				req := mustReq(t, "http://api.test/")
				req.Header.Set("Authorization", "Bearer SECRET")
				resp, err := tr.RoundTrip(req)
				if assert.NoError(t, err) {
					drain(resp)
				}
			})
		}
		wg.Wait()
		out := buf.String()
		assert.Equal(t, 1, strings.Count(out, "headway: host down, probing"), out)
		assert.Equal(t, 1, strings.Count(out, "headway: host back"), out)
		assert.Contains(t, out, "next_probe=")
		assert.Contains(t, out, "host=api.test")
		assert.NotContains(t, out, "SECRET")
	})
}

// TestAProbeReachesTheHostOnce: net/http sends an idempotent request again
// by itself when a reused connection breaks before the answer; a probe on
// a pooled connection of a host that resets them would reach it once per
// pooled connection. A probe is sent so that net/http cannot replay it:
// one probe, one request at the host. Real loopback connections, a probe
// interval of 10 ms; nothing is timed.
func TestAProbeReachesTheHostOnce(t *testing.T) {
	var mode atomic.Int32 // 0: answer 200; 1: 500; 2: reset the connection
	var arrivals atomic.Int32
	var bodied atomic.Bool
	entered, release := make(chan struct{}, 4), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case 0:
			if r.URL.Path == "/wait" {
				entered <- struct{}{}
				<-release // the warm-up requests overlap: one connection each
			}
		case 1:
			w.WriteHeader(http.StatusInternalServerError)
		case 2:
			arrivals.Add(1)
			if r.ContentLength != 0 || len(r.TransferEncoding) != 0 {
				bodied.Store(true) // not the GET the caller made
			}
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(http.ErrAbortHandler)
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // close sends RST
			}
			conn.Close()
		}
	}))
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: 8}
	defer base.CloseIdleConnections()
	tr := New(base, WithRetry(RetryOptions{MaxAttempts: 1, ProbeInterval: 10 * time.Millisecond}))
	get := func(path string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		require.NoError(t, err)
		return tr.RoundTrip(req)
	}
	// Four connections in the pool (after a first request, which a key
	// sends alone).
	resp, err := get("/")
	require.NoError(t, err)
	drain(resp)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			resp, err := get("/wait")
			if assert.NoError(t, err) {
				drain(resp)
			}
		})
	}
	for range 4 {
		<-entered
	}
	close(release)
	wg.Wait()
	// A 500: the host is down; its connection goes back to the pool.
	mode.Store(1)
	resp, err = get("/")
	require.NoError(t, err)
	drain(resp)
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	// The host now resets every connection: the next request is the probe.
	mode.Store(2)
	if resp, err := get("/"); err == nil {
		drain(resp)
		t.Fatal("the probe got an answer from a host that resets every connection")
	}
	assert.Equal(t, int32(1), arrivals.Load(), "requests of one probe that reached the host")
	assert.False(t, bodied.Load(), "the probe went as a GET without a body")
}

// TestOutagesOfEveryLength: the workload (8 workers, 600 GETs at
// 100 a second, 5 ms answers) meets 500s, or a host that hangs past a
// 200 ms timeout, for outages of many lengths, in virtual time. Whatever
// the length, nothing fails; the first probe after the host's return
// leaves within the longest probe interval (500 ms) of it, since probes
// are not jittered; and the requests sent into the outage are the first
// failures and the probes of the schedule (200 ms, 400 ms, then 500 ms,
// each from the last failure). The efficiency is logged: the lag is the
// price of the few probes (see RetryOptions.MaxProbeInterval). Up to 10 s:
// the probes are attempts of the request at the head of the queue, and 30
// attempts last some 15 s at two probes a second (in hold mode they are
// not: see TestHoldLosesNothingToALongOutage).
func TestOutagesOfEveryLength(t *testing.T) {
	lengths := []time.Duration{300 * time.Millisecond, 700 * time.Millisecond, time.Second, 1500 * time.Millisecond,
		2 * time.Second, 2500 * time.Millisecond, 2700 * time.Millisecond, 3 * time.Second, 3300 * time.Millisecond,
		4 * time.Second, 5 * time.Second, 7 * time.Second, 10 * time.Second}
	for _, shape := range []fakeserver.OutageShape{fakeserver.OutageError, fakeserver.OutageHang} {
		for _, d := range lengths {
			t.Run(fmt.Sprintf("%v/%v", shape, d), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					srv := fakeserver.New(fakeserver.Config{Limit: 100, Burst: 10,
						Faults: fakeserver.Faults{Outage: shape, Latency: 5 * time.Millisecond}})
					start := time.Now()
					from, to := start.Add(2*time.Second), start.Add(2*time.Second+d)
					srv.SetOutage(from, to)
					w := &watchRT{base: timeoutRT{srv.Transport(), 200 * time.Millisecond}, downFrom: from, downTo: to}
					tr := New(w, WithLimit(PerSecond(100).WithBurst(9)), WithRetry(batchRetry))
					failed, errs := outageRun(t, tr, 600, 8)
					took := time.Since(start)
					assert.Zero(t, failed, "%v", errs)
					after := w.sentIn(to, to.Add(time.Hour))
					require.NotEmpty(t, after)
					lag := after[0].Sub(to)
					// A probe that hangs at the host's return fails then
					// (the fake server resets it), or at its timeout.
					assert.LessOrEqual(t, lag, 500*time.Millisecond+5*time.Millisecond, "the host waited for its probe")
					// The schedule's probes before the host came back, from
					// the first failure (at the latest its timeout).
					probes, at, iv := 0, time.Duration(0), 200*time.Millisecond
					if shape == fakeserver.OutageHang {
						at = 200 * time.Millisecond
					}
					for at += iv; at < d; at += iv {
						probes++
						if shape == fakeserver.OutageHang {
							at += 200 * time.Millisecond // each probe hangs until its timeout
						}
						iv = min(2*iv, 500*time.Millisecond)
					}
					first := 1 // the request that met the outage
					if shape == fakeserver.OutageHang {
						first = 3 // those sent before the silence was a stall: 20 ms at 10 ms apart
					}
					into := srv.Stats().Outage
					assert.LessOrEqual(t, into, int64(first+probes), "sent into the outage")
					least := d + (600-20)*10*time.Millisecond
					t.Logf("efficiency %.3f, %d sent into the outage, first probe after it +%v", least.Seconds()/took.Seconds(), into, lag)
				})
			})
		}
	}
}

// A silence's mark, read back, gives when it began to a unit or less, never
// later, so that a stall is never seen late: across the mark's wrap too.
func TestASilenceIsReadBackNeverLate(t *testing.T) {
	const unit = 1 << silenceShift
	wrap := int64(silenceMask) << silenceShift // (t>>shift)+1 wraps to 0 at wrap-unit
	for _, began := range []int64{0, 1, unit - 1, unit, 12345678901, wrap - 2*unit, wrap - unit, wrap - 1, wrap, wrap + unit, 3*wrap + 7} {
		m := silenceAt(began)
		if m == 0 || m > silenceMask {
			t.Fatalf("silenceAt(%d) = %d", began, m)
		}
		for _, later := range []int64{0, 1, unit, time.Second.Nanoseconds(), time.Hour.Nanoseconds(), 40 * 24 * time.Hour.Nanoseconds()} {
			got := silenceStart(m, began+later)
			if got > began || began-got >= 2*unit {
				t.Errorf("silence began at %d, read %d later: %d (%d early)", began, later, got, began-got)
			}
		}
	}
}

// The count of departures out and the silence share a word: a departure
// begins a silence only when none has begun, an answer ends it, and a
// departure that was not sent ends it only when nothing is left out.
func TestPendingCountsDeparturesAndTheSilence(t *testing.T) {
	var k keyState
	if !k.depart(1, 5000) || k.unseenN() != 1 || !k.silent() {
		t.Fatalf("first departure: pending %#x", k.pending.Load())
	}
	mark := k.silence()
	if k.depart(1, 9000) || k.unseenN() != 2 || k.silence() != mark {
		t.Fatalf("second departure moved the silence: pending %#x", k.pending.Load())
	}
	if k.withdraw(); k.unseenN() != 1 || k.silence() != mark {
		t.Fatalf("a withdrawal with one out ended the silence: pending %#x", k.pending.Load())
	}
	k.pending.Add(1)
	if k.seen(); k.unseenN() != 1 || k.silent() {
		t.Fatalf("an answer left the silence: pending %#x", k.pending.Load())
	}
	if !k.depart(0, 20000) || k.depart(0, 30000) || silenceStart(k.silence(), 30000) > 20000 {
		t.Fatalf("a silence begun alone: pending %#x", k.pending.Load())
	}
	if k.endSilence(); k.silent() || k.unseenN() != 1 {
		t.Fatalf("endSilence: pending %#x", k.pending.Load())
	}
	k.depart(0, 40000)
	if k.withdraw(); k.pending.Load() != 0 {
		t.Fatalf("the last withdrawal left pending %#x", k.pending.Load())
	}
}
