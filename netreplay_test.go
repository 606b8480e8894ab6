package headway

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// warmPool opens n keep-alive connections of base to url at once, and
// leaves them in its pool: url's handler must hold each request until n
// have arrived (see holdUntil).
func warmPool(t *testing.T, base *http.Transport, url string, n int) {
	t.Helper()
	c := &http.Client{Transport: base}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := c.Get(url)
			if assert.NoError(t, err) {
				drain(resp)
			}
		})
	}
	wg.Wait()
}

// holdUntil returns a handler that holds each request until n have
// arrived, then answers them all, and its count of arrivals.
func holdUntil(n int32) (http.HandlerFunc, *atomic.Int32) {
	var arrived atomic.Int32
	all := make(chan struct{})
	return func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == n {
			close(all)
		}
		<-all
		io.WriteString(w, "{}\n")
	}, &arrived
}

// TestAResetOutageReachesTheHostOncePerWorker: issue 11's reset row, in
// small. A host that resets every connection gets, from 8 workers paced at
// 100 a second over a pool of 16 warm keep-alive connections, no more
// requests during its outage than there are workers, and nothing fails.
// Unwatched, net/http sends the first request of the outage again on
// every pooled connection (some 17 arrivals) before headway hears of it.
// Real loopback. What reaches the host during the outage is at most what
// headway handed its base then (the attempts in flight as it began, which
// on a loaded machine can be every worker's, and the probes), plus the one
// replay of net/http's that the key lets go: none of net/http's other
// re-sends.
func TestAResetOutageReachesTheHostOncePerWorker(t *testing.T) {
	// On a loaded machine the workload may reach the host only after its
	// outage (a CI run with staticcheck and other tests beside it: 4
	// attempts handed to the base during it, none arrived in it): such a
	// run says nothing, and is run again.
	for run := 1; ; run++ {
		if resetOutageRun(t, run == 3) || run == 3 {
			return
		}
		t.Logf("run %d missed the outage: again", run)
	}
}

// resetOutageRun is one run of TestAResetOutageReachesTheHostOncePerWorker.
// It reports whether the workload met the outage, and checks what it
// found if so, or if last.
func resetOutageRun(t *testing.T, last bool) bool {
	const workers, pool = 8, 16
	warm, _ := holdUntil(pool)
	fs, err := fakeserver.Start(fakeserver.Config{
		Limit: 10000, Window: time.Second, Burst: 10000,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/warm" {
				warm(w, r)
				return
			}
			io.WriteString(w, "{}\n")
		}),
		Faults: fakeserver.Faults{Outage: fakeserver.OutageReset},
	})
	require.NoError(t, err)
	defer fs.Close()
	base := &http.Transport{MaxIdleConnsPerHost: pool}
	defer base.CloseIdleConnections()
	warmPool(t, base, fs.URL+"/warm", pool)

	spans := &spanRT{base: base}
	tr := New(spans, WithLimit(PerSecond(100).WithBurst(9)),
		WithRetry(RetryOptions{MaxAttempts: 30, Statuses: []int{429, 500, 502, 503, 504}}))
	now := time.Now()
	from, to := now.Add(300*time.Millisecond), now.Add(800*time.Millisecond)
	fs.Server.SetOutage(from, to)
	var failed atomic.Int32
	fanOut(120, workers, func() {
		resp, err := tr.RoundTrip(mustReq(t, fs.URL+"/items"))
		if err != nil || resp.StatusCode != http.StatusOK {
			failed.Add(1)
		}
		drain(resp)
	})
	st := fs.Server.Stats()
	handed := spans.during(from, to)
	t.Logf("%d requests arrived during the outage, %d in all; headway handed its base %d then", st.Outage, st.Total, handed)
	assert.Zero(t, failed.Load(), "failed")
	if st.Outage == 0 && !last {
		return false
	}
	assert.NotZero(t, st.Outage, "the workload met the outage")
	assert.LessOrEqual(t, st.Outage, int64(handed)+1, "requests that reached the host during its outage")
	assert.LessOrEqual(t, handed, workers+3, "attempts during a 0.5 s outage: those in flight as it began, and the probes")
	return true
}

// spanRT records when each attempt handed to its base began and ended.
type spanRT struct {
	base  http.RoundTripper
	mu    sync.Mutex
	spans [][2]time.Time
}

func (s *spanRT) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := s.base.RoundTrip(req)
	s.mu.Lock()
	s.spans = append(s.spans, [2]time.Time{start, time.Now()})
	s.mu.Unlock()
	return resp, err
}

// during returns how many attempts were out at some instant in [from, to).
func (s *spanRT) during(from, to time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sp := range s.spans {
		if sp[0].Before(to) && !sp[1].Before(from) {
			n++
		}
	}
	return n
}

// closeOnReuse is a server that closes each connection, without a word,
// as the second request on it arrives: a server whose idle timeout closes
// a keep-alive connection just as the client sends on it, the benign race
// net/http's replays are for. The request is not served; a fresh
// connection's is.
type closeOnReuse struct {
	served, dropped atomic.Int32
}

type connCount struct{ n atomic.Int32 }

type connCountKey struct{}

func (s *closeOnReuse) start(t *testing.T) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(connCountKey{}).(*connCount).n.Add(1) > 1 {
			s.dropped.Add(1)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(http.ErrAbortHandler)
			}
			conn.Close()
			return
		}
		s.served.Add(1)
		io.WriteString(w, "{}\n")
	}))
	srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connCountKey{}, &connCount{})
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// TestAClosedIdleConnectionIsNoOutage: a host that is up, whose server
// closes keep-alive connections as requests arrive on them, is no outage.
// The key's replay of a request that met one goes on a fresh connection,
// where it succeeds: nothing fails, the key never goes down, and the
// requests behind it wait for that one round trip only. A trace the
// caller put in the request's context is still called, for every try.
func TestAClosedIdleConnectionIsNoOutage(t *testing.T) {
	var s closeOnReuse
	srv := s.start(t)
	base := &http.Transport{MaxIdleConnsPerHost: 8}
	defer base.CloseIdleConnections()
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	tr := New(base, WithLogger(log))
	var gotConn, reused atomic.Int32
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		gotConn.Add(1)
		if info.Reused {
			reused.Add(1)
		}
	}}
	const n = 200
	var failed atomic.Int32
	fanOut(n, 4, func() {
		req := mustReq(t, srv.URL+"/items")
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			failed.Add(1)
			t.Log(err)
		}
		drain(resp)
	})
	t.Logf("served %d, dropped %d; the caller's GotConn called %d times, %d on reused connections",
		s.served.Load(), s.dropped.Load(), gotConn.Load(), reused.Load())
	assert.Zero(t, failed.Load(), "failed")
	assert.EqualValues(t, n, s.served.Load(), "served")
	assert.NotZero(t, s.dropped.Load(), "connections closed as a request came: the race happened")
	assert.GreaterOrEqual(t, gotConn.Load(), n+s.dropped.Load(), "the caller's trace saw every try")
	logMu.Lock()
	defer logMu.Unlock()
	assert.NotContains(t, logs.String(), "host down", "the key went down")
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestHTTP2IsNotWatched: over HTTP/2, whose Transport sends a request
// again only when the server did not take it, net/http's retries are left
// alone: once an answer came over HTTP/2, the host's requests go without
// a watch.
func TestHTTP2IsNotWatched(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	tr := New(base)
	req := mustReq(t, srv.URL+"/")
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	drain(resp)
	require.Equal(t, 2, resp.ProtoMajor)
	k := tr.keys.get(tr.cfg.keyFunc(req), tr, req)
	assert.EqualValues(t, connsHTTP2, k.host.conns.Load())
	assert.False(t, k.watchConns(k.sent+1), "a departure of an HTTP/2 host is watched")
	assert.True(t, k.watchConns(connsRecheck), "one in connsRecheck is")
}

// TestABaseThatIsNotNetHTTPIsNotWatched: a base that calls no GotConn
// before its answer (a stub, a cache) costs a watch on its first answer
// only, and then on one departure in connsRecheck (BenchmarkOverhead
// counts no allocation).
func TestABaseThatIsNotNetHTTPIsNotWatched(t *testing.T) {
	tr := New(&stubRT{})
	req := mustReq(t, "http://api.test/")
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	drain(resp)
	k := tr.keys.get(tr.cfg.keyFunc(req), tr, req)
	assert.EqualValues(t, connsNone, k.host.conns.Load())
	assert.False(t, k.watchConns(2))
}

// A base that answers host after host with no GotConn is not net/http's:
// once connlessTrust hosts in a row said so, a new host's first request
// goes unwatched too (no watch's allocations for a host a cache or a stub
// answers), and one answer through net/http watches new hosts again.
func TestNewHostsOfABaseThatIsNotNetHTTPAreNotWatched(t *testing.T) {
	var gotConns atomic.Bool // the base calls GotConn, as net/http would
	var watched []bool
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		trace := httptrace.ContextClientTrace(req.Context())
		watched = append(watched, trace != nil && trace.GotConn != nil)
		if trace != nil && trace.GotConn != nil && gotConns.Load() {
			trace.GotConn(httptrace.GotConnInfo{})
		}
		return &http.Response{StatusCode: 200, ProtoMajor: 1, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
	})
	tr := New(base)
	get := func(host string) bool {
		t.Helper()
		resp, err := tr.RoundTrip(mustReq(t, "http://"+host+"/"))
		require.NoError(t, err)
		drain(resp)
		return watched[len(watched)-1]
	}
	for i := range connlessTrust {
		assert.True(t, get(fmt.Sprintf("h%d.test", i)), "host %d: its first request is not watched", i)
	}
	assert.False(t, get("next.test"), "a new host's first request is watched after %d connless hosts", connlessTrust)
	assert.False(t, get("h0.test"), "a host known to be connless is watched")

	// A host whose answers come through net/http: the recheck of one
	// departure in connsRecheck finds it, and new hosts are watched again.
	gotConns.Store(true)
	for i := 1; i <= connsRecheck; i++ {
		get("net.test")
	}
	assert.True(t, watched[len(watched)-1], "the recheck did not watch")
	assert.True(t, get("new.test"), "a new host after an answer through net/http is not watched")

	// A base that mixes hosts: any answer through net/http, of a host
	// known to be its, watches new hosts again.
	gotConns.Store(false)
	for i := range connlessTrust {
		get(fmt.Sprintf("stub%d.test", i))
	}
	assert.False(t, get("stub-next.test"))
	gotConns.Store(true)
	assert.True(t, get("net.test"), "a host known to answer through net/http is not watched")
	assert.True(t, get("new2.test"), "a new host after an answer through net/http is not watched")
}

// replayRT plays net/http's part in virtual time: each try of a request
// takes a connection and calls the trace's GotConn with it, and is sent
// unless the connection was closed there; a try that breaks on a reused
// connection is tried again on the next one, as net/http does, and the
// pool holds pooled reused connections (then fresh ones are dialled).
// The host breaks the next breaks tries to arrive, and what arrives while
// down or is still unanswered when it goes down, and answers the rest
// after latency; slow names a path answered after slowFor instead.
type replayRT struct {
	mu       sync.Mutex
	pooled   int
	breaks   int
	down     bool
	latency  time.Duration
	slow     string
	slowFor  time.Duration
	arrivals []time.Time // when each try reached the host
	closed   int         // connections closed in GotConn
	ended    int         // of which fresh ones, which end the attempt
}

type traceConn struct {
	net.Conn
	closed bool
}

func (c *traceConn) Close() error { c.closed = true; return nil }

func (f *replayRT) RoundTrip(req *http.Request) (*http.Response, error) {
	trace := httptrace.ContextClientTrace(req.Context())
	for {
		f.mu.Lock()
		reused := f.pooled > 0
		if reused {
			f.pooled--
		}
		f.mu.Unlock()
		c := &traceConn{}
		if trace != nil && trace.GotConn != nil {
			trace.GotConn(httptrace.GotConnInfo{Conn: c, Reused: reused})
		}
		f.mu.Lock()
		if c.closed {
			f.closed++
			if !reused {
				f.ended++
			}
			f.mu.Unlock()
			if reused {
				continue // nothing written: the next connection
			}
			return nil, net.ErrClosed
		}
		f.arrivals = append(f.arrivals, time.Now())
		down := f.down || f.breaks > 0
		if f.breaks > 0 {
			f.breaks--
		}
		f.mu.Unlock()
		if down {
			if reused {
				continue // broken after it was written: replayable, sent again
			}
			return nil, fakeserver.ErrConnReset
		}
		d := f.latency
		if req.URL.Path == f.slow {
			d = f.slowFor
		}
		time.Sleep(d)
		f.mu.Lock()
		if f.down { // reset while it waited for its answer
			f.mu.Unlock()
			if reused {
				continue
			}
			return nil, fakeserver.ErrConnReset
		}
		f.pooled++
		f.mu.Unlock()
		return &http.Response{StatusCode: http.StatusOK, ProtoMajor: 1, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}
}

// TestAReplayHoldsTheQueueForOneRoundTrip, in virtual time: a request
// whose reused connection broke on a host that is up is sent again once,
// on a fresh connection, and the key's queue waits for its answer, no
// longer; the pooled connections net/http would have tried first are
// closed unwritten.
func TestAReplayHoldsTheQueueForOneRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &replayRT{pooled: 4, latency: 50 * time.Millisecond}
		tr := New(base)
		get := func(path string) {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test"+path))
			if assert.NoError(t, err) {
				drain(resp)
			}
		}
		get("/") // known to be net/http's over HTTP/1
		// The next request meets a connection the host closed: it is
		// sent again while the second waits.
		base.mu.Lock()
		base.breaks, base.pooled = 1, 4
		base.mu.Unlock()
		start := time.Now()
		var second time.Time
		var wg sync.WaitGroup
		wg.Go(func() { get("/first") })
		wg.Go(func() {
			time.Sleep(time.Millisecond)
			get("/second")
			second = time.Now()
		})
		wg.Wait()
		base.mu.Lock()
		defer base.mu.Unlock()
		assert.Len(t, base.arrivals, 1+1+1+1, "the warm-up, the first try, its one replay, the second")
		assert.Equal(t, 3, base.closed, "pooled connections closed unwritten")
		assert.Equal(t, 100*time.Millisecond, second.Sub(start),
			"the second leaves at the replay's answer (50 ms), and takes its own round trip")
		k := tr.keys.get("api.test", tr, mustReq(t, "http://api.test/"))
		assert.False(t, k.isDown(), "the host is up")
	})
}

// TestASlowReplayHoldsTheQueueForProbeWaitAtMost, in virtual time: a
// replay that takes long is a long call, not a host down: the queue waits
// for it probeWait at most.
func TestASlowReplayHoldsTheQueueForProbeWaitAtMost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &replayRT{pooled: 1, latency: 10 * time.Millisecond, slow: "/slow", slowFor: 5 * time.Second}
		tr := New(base)
		get := func(path string) {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test"+path))
			if assert.NoError(t, err) {
				drain(resp)
			}
		}
		get("/")
		base.mu.Lock()
		base.breaks = 1
		base.mu.Unlock()
		start := time.Now()
		var second time.Time
		var wg sync.WaitGroup
		wg.Go(func() { get("/slow") })
		wg.Go(func() {
			time.Sleep(time.Millisecond)
			get("/second")
			second = time.Now()
		})
		wg.Wait()
		// probeWait, or a little more where the stall rule (see
		// outageGate) holds longer; not the call's 5 s.
		took := second.Sub(start)
		assert.GreaterOrEqual(t, took, probeWait, "the second waited for the replay")
		assert.Less(t, took, probeWait+100*time.Millisecond, "the second waited for the whole replay")
	})
}

// TestAReplayThatFailsBeginsAnOutage, in virtual time: a host that resets
// every connection, met by 4 workers with a pool of 8 warm connections
// and answers that take 30 ms, so that several are in flight when it goes
// down. The first replay goes on a fresh connection and fails: the host is
// down; the replays of the other requests in flight are stopped unwritten,
// and their requests wait behind the probes; nothing fails. The host sees,
// while down, the one replay and the probes (200 and 600 ms), and the
// first tries that left before the first failure was known: no more than
// there are workers.
func TestAReplayThatFailsBeginsAnOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const workers = 4
		base := &replayRT{pooled: 8, latency: 30 * time.Millisecond}
		tr := New(base, WithLimit(PerSecond(100).WithBurst(9)), WithRetry(batchRetry))
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
		require.NoError(t, err)
		drain(resp)
		start := time.Now().Add(200 * time.Millisecond)
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(time.Until(start))
			base.mu.Lock()
			base.down = true
			base.mu.Unlock()
			time.Sleep(time.Second)
			base.mu.Lock()
			base.down = false
			base.mu.Unlock()
		})
		var failed atomic.Int32
		fanOut(120, workers, func() {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/items"))
			if err != nil {
				failed.Add(1)
				t.Log(err)
			}
			drain(resp)
		})
		wg.Wait()
		base.mu.Lock()
		defer base.mu.Unlock()
		var into int
		for _, at := range base.arrivals {
			if !at.Before(start) && at.Before(start.Add(time.Second)) {
				into++
			}
		}
		t.Logf("%d tries reached the host while it was down; %d connections closed unwritten, %d attempts stopped",
			into, base.closed, base.ended)
		assert.Zero(t, failed.Load(), "failed")
		assert.GreaterOrEqual(t, into, 1+2, "the replay and the probes")
		assert.LessOrEqual(t, into, workers, "tries that reached the host while it was down")
		assert.NotZero(t, base.ended, "attempts stopped, whose requests waited for the probes")
	})
}

// BenchmarkConnWatch measures what watching net/http's replays adds to an
// attempt over HTTP/1 (the watch, its trace and context, the request's
// copy, one GotConn, and finish), beside one round trip over loopback
// through net/http alone, and through a Transport that watches it.
func BenchmarkConnWatch(b *testing.B) {
	b.Run("watch", func(b *testing.B) {
		tr := New(&stubRT{})
		req := mustReq(b, "http://api.test/")
		k := tr.keys.get(tr.cfg.keyFunc(req), tr, req)
		resp := &http.Response{StatusCode: http.StatusOK, ProtoMajor: 1}
		info := httptrace.GotConnInfo{Reused: true}
		b.ReportAllocs()
		for b.Loop() {
			w, out := newConnWatch(req, k, 1)
			httptrace.ContextClientTrace(out.Context()).GotConn(info)
			w.finish(resp, nil)
		}
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	for _, c := range []struct {
		name string
		rt   http.RoundTripper
	}{{"loopback/net-http", base}, {"loopback/headway", New(base)}} {
		b.Run(c.name, func(b *testing.B) {
			req := mustReq(b, srv.URL+"/")
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				drain(resp)
			}
		})
	}
}

// TestAResetOverTLSReachesTheHostTwice: over HTTP/1 on TLS, where a
// connection closed in GotConn sends a close_notify alert and nothing of
// the request, the first request of a reset outage reaches the host twice,
// the try and its one re-send on a fresh connection, not once per pooled
// connection (9 here, unwatched).
func TestAResetOverTLSReachesTheHostTwice(t *testing.T) {
	const pool = 8
	var resetting atomic.Bool
	var arrivals atomic.Int32
	warm, _ := holdUntil(pool)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/warm" {
			warm(w, r)
			return
		}
		if !resetting.Load() {
			io.WriteString(w, "{}\n")
			return
		}
		arrivals.Add(1)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		if tc, ok := conn.(*tls.Conn); ok {
			if nc, ok := tc.NetConn().(*net.TCPConn); ok {
				_ = nc.SetLinger(0) // close sends RST
			}
		}
		conn.Close()
	}))
	srv.StartTLS() // HTTP/1.1 only: EnableHTTP2 is not set
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = pool
	defer base.CloseIdleConnections()
	warmPool(t, base, srv.URL+"/warm", pool)
	tr := New(base, WithRetry(RetryOptions{MaxAttempts: 1}))
	resp, err := tr.RoundTrip(mustReq(t, srv.URL+"/items")) // known to be HTTP/1
	require.NoError(t, err)
	drain(resp)
	require.Equal(t, 1, resp.ProtoMajor)
	resetting.Store(true)
	if resp, err := tr.RoundTrip(mustReq(t, srv.URL+"/items")); err == nil {
		drain(resp)
		t.Fatal("an answer from a host that resets every connection")
	}
	assert.Equal(t, int32(2), arrivals.Load(), "arrivals of one request: the try and its re-send")
}

// TestAHeldReplayWithGetBodyIsSentAgainWithRetriesOff, in virtual time:
// with retries off (MaxAttempts 1), a request whose body has a GetBody,
// which net/http would send again after a broken keep-alive connection,
// is not failed when its replay is stopped behind another request's: it
// waits in the queue, as a request without a body does, and goes again
// with a body from GetBody.
func TestAHeldReplayWithGetBodyIsSentAgainWithRetriesOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &replayRT{pooled: 4, latency: 10 * time.Millisecond}
		tr := New(base, WithRetry(RetryOptions{MaxAttempts: 1}))
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
		require.NoError(t, err)
		drain(resp)
		k := tr.keys.get("api.test", tr, mustReq(t, "http://api.test/"))
		base.mu.Lock()
		base.breaks = 1
		base.mu.Unlock()
		// Another request's replay is out as the request is sent (it never
		// answers: the queue waits for it probeWait at most).
		claimed := false
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
			if !claimed {
				claimed = true
				assert.Equal(t, replayClaim, k.replayTurn(1<<40))
			}
		}}
		var bodies []string
		req, err := http.NewRequest(http.MethodPut, "http://api.test/items/1", strings.NewReader("payload"))
		require.NoError(t, err)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		get := req.GetBody
		req.GetBody = func() (io.ReadCloser, error) {
			b, err := get()
			bodies = append(bodies, "GetBody")
			return b, err
		}
		resp, err = tr.RoundTrip(req)
		require.NoError(t, err, "a replay stopped behind another one")
		drain(resp)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, []string{"GetBody"}, bodies, "the request went again with a body from GetBody")
	})
}

// TestAClosedIdleConnectionUnderAPutIsNoOutage: net/http does not send a
// PUT (nor a POST with a body) again by itself when the keep-alive
// connection it went on turns out closed by the server, so the race
// TestAClosedIdleConnectionIsNoOutage is about reaches headway as a
// transport error. It is no failure of the host: the key does not go down
// and its breaker does not count it. Before, each such race began an
// outage (the key's queue held for a probe) and counted as a breaker
// failure: five in a row opened the breaker of a host that answers every
// request on a fresh connection, and 92 of these 100 PUTs failed.
func TestAClosedIdleConnectionUnderAPutIsNoOutage(t *testing.T) {
	var s closeOnReuse
	srv := s.start(t)
	base := &http.Transport{MaxIdleConnsPerHost: 8}
	defer base.CloseIdleConnections()
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var opened atomic.Int32
	// Every pooled connection of this server breaks when reused: each
	// request may need a retry or two, which the budget is not for here.
	tr := New(base, WithLogger(log),
		WithRetry(RetryOptions{MaxAttempts: 10, InitialInterval: time.Millisecond, Budget: BudgetOptions{Disable: true}}),
		WithBreaker(BreakerSettings{OnStateChange: func(_ string, _, to BreakerState) {
			if to == BreakerOpen {
				opened.Add(1)
			}
		}}))
	const n = 100
	var failed atomic.Int32
	fanOut(n, 4, func() {
		req, err := http.NewRequest(http.MethodPut, srv.URL+"/items", strings.NewReader("{}"))
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			failed.Add(1)
			t.Log(err)
		}
		drain(resp)
	})
	t.Logf("served %d, dropped %d", s.served.Load(), s.dropped.Load())
	assert.NotZero(t, s.dropped.Load(), "connections closed as a request came: the race happened")
	assert.Zero(t, opened.Load(), "the breaker opened")
	assert.Zero(t, failed.Load(), "failed")
	logMu.Lock()
	defer logMu.Unlock()
	assert.NotContains(t, logs.String(), "host down", "the key went down")
}
