package headway

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
)

// net/http's Transport sends a request again by itself, unasked, when a
// reused keep-alive connection breaks before the answer and the request is
// replayable (an idempotent method or an idempotency key, with no body or
// a GetBody): it tries the next pooled connection, and the next, until a
// fresh one (roundTrip's loop and persistConn.shouldRetryRequest in
// net/http/transport.go). That is right for the race of a server that
// closed an idle connection as the request went out; against a host that
// resets its connections it sends one request up to once per pooled
// connection, before the caller, or headway, hears of anything.
//
// A connWatch watches these replays through the request's
// httptrace.ClientTrace (composed with any trace the caller set): net/http
// calls GotConn once per try, on the goroutine that sends it, before a
// byte of it is written. The second and later calls are replays, and the
// key decides (see keyState.replayTurn). A host that is up gets one at a
// time, sent on a fresh connection, where a break is no race of a closed
// idle connection but the host's failure: the pooled connections it is
// handed before one is dialled are closed, and the key's queue waits for
// its answer. The replays of other requests meanwhile, and any while the
// host is down, are stopped: their requests wait in the key's queue,
// behind the replay or probe, and are sent again when it says (see
// call.held), spending no attempt, as the replays net/http would have
// sent.
//
// A try is stopped by closing, in GotConn, the connection it was handed:
// net/http writes the request only after GotConn returns
// (persistConn.roundTrip hands it to the writeLoop, which writes to the
// connection), and a write to a closed connection fails before a byte
// leaves. net/http then sees a connection that broke before it wrote
// anything, as when a server closes an idle connection just as it is taken
// from the pool, and tries the next (which is stopped too) until the
// failure of a fresh one ends the attempt. Closing the pooled connections
// costs the host's pool: they are dialled again as needed.
//
// HTTP/2 is left alone: its Transport sends a request again only when the
// server did not take it (GOAWAY past its stream, REFUSED_STREAM, a
// connection unusable before the request went), and its connections carry
// other requests, which closing one would break. A connection is HTTP/2
// when it is a *tls.Conn that negotiated h2, or one without a handshake
// (net/http's unencrypted HTTP/2); a host whose answers came over HTTP/2 is
// not watched. (An HTTP/2 base over plain connections, such as
// x/net/http2 with AllowHTTP, is told apart only by its answers.)
//
// A watch costs an attempt a few allocations (the trace, its context, the
// request's copy), small beside net/http's own; it is made only for hosts
// whose answers came through net/http over HTTP/1, or are not known yet,
// so a base that is not net/http's pays for it on its first answer and
// then on one departure in connsRecheck.
type connWatch struct {
	trace httptrace.ClientTrace
	k     *keyState
	seq   uint64       // the attempt's departure
	got   atomic.Int32 // GotConn calls: the attempt's, then net/http's replays
	// reused: the attempt's own connection (its first GotConn) was a
	// pooled HTTP/1 keep-alive connection.
	reused atomic.Bool

	mu      sync.Mutex // guards the rest, set once net/http tries again
	replay  bool       // the attempt holds its key's replay
	sent    bool       // its replay went
	failed  bool       // its replay, or its probe, broke and net/http tried again
	stopped bool       // a replay of it was stopped: it waits in the queue
	h2      bool       // it went over HTTP/2
}

// What carries a host's requests, as its answers showed (hostState.conns).
const (
	connsUnknown = iota // nothing known yet: watch
	connsHTTP1          // net/http over HTTP/1: watch
	connsNone           // an answer came with no GotConn: not net/http's
	connsHTTP2          // HTTP/2: its replays are its own business
)

// connsRecheck is how often a departure of a host not watched is watched
// anyway, should its base turn out to be net/http's after all.
const connsRecheck = 1024

// connlessTrust is how many hosts in a row must answer with no GotConn
// before a host not known yet goes unwatched too: the Transport's base is
// not net/http's (a stub, a cache), and a watch would cost each new host's
// first request four allocations for nothing. Any answer through net/http
// (a watched request of a host it carries) watches new hosts again.
const connlessTrust = 8

// watchConns reports whether attempt seq of k gets a connWatch.
func (k *keyState) watchConns(seq uint64) bool {
	if k.env.probe.initial <= 0 {
		return false // no outage state to hold a replay behind
	}
	switch k.hostConns() {
	case connsHTTP1:
		return true
	case connsUnknown:
		if k.env.connless.Load() < connlessTrust {
			return true
		}
	}
	return seq%connsRecheck == 0
}

// hostConns returns what carries the requests of k's host (see
// hostState.conns): k's copy, while no host's changed since it was made.
// A request reads its host's memory (with many keys, likely out of the
// CPU's nearer caches) only after a change.
func (k *keyState) hostConns() uint32 {
	e := k.env.connsEpoch.Load()
	if v := k.conns.Load(); v>>2 == e+1 {
		return uint32(v & 3)
	}
	c := k.host.conns.Load()
	k.conns.Store((e+1)<<2 | uint64(c))
	return c
}

// setConns sets what carries the requests of k's host, h, to c.
func (k *keyState) setConns(h *atomic.Uint32, c uint32) {
	h.Store(c)
	k.env.connsEpoch.Add(1) // after the host's: see hostConns
}

// newConnWatch returns a watch of net/http's replays of out, attempt seq
// of k, and the request to send in out's place: out on a context that
// carries the watch's trace.
func newConnWatch(out *http.Request, k *keyState, seq uint64) (*connWatch, *http.Request) {
	w := &connWatch{k: k, seq: seq}
	w.trace.GotConn = w.gotConn
	return w, out.WithContext(httptrace.WithClientTrace(out.Context(), &w.trace))
}

// gotConn is the trace's GotConn: the first call is the attempt's own, any
// later one a replay, which it lets go or stops (see connWatch).
func (w *connWatch) gotConn(info httptrace.GotConnInfo) {
	if w.got.Add(1) == 1 || info.Conn == nil {
		if info.Reused && info.Conn != nil && !isHTTP2(info.Conn) {
			w.reused.Store(true)
		}
		return
	}
	if isHTTP2(info.Conn) || w.k.host.conns.Load() == connsHTTP2 {
		w.mu.Lock()
		w.h2 = true
		w.mu.Unlock()
		return
	}
	if !w.turn(info.Reused) {
		info.Conn.Close()
	}
}

// turn reports whether a replay of w's attempt on a connection (reused or
// not) may go.
func (w *connWatch) turn(reused bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.replay && !w.stopped && !w.failed {
		switch w.k.replayTurn(w.seq) {
		case replayGo:
			return true
		case replayClaim:
			w.replay = true
		case replayStop:
			w.stopped = true
		case replayFailed:
			w.failed = true
		}
	}
	switch {
	case !w.replay || w.failed:
		return false
	case w.sent:
		w.failed = true // it broke, on a fresh connection: net/http does not try again, but a base may
		return false
	case reused:
		return false // the replay goes on a fresh connection
	}
	w.sent = true
	return true
}

// finish notes, once the attempt returned resp or err, what carries its
// host's requests (see hostState.conns), and returns what became of
// net/http's replays of it: whether the key's replay or probe that the
// attempt held broke again, and whether one was stopped behind its key's
// replay or probe. raced reports an attempt that broke, without an
// answer, on the pooled keep-alive connection it went on, and that
// net/http did not send again (a PUT, a body without GetBody, a POST):
// the race of a server that closed the connection as the request came, as
// likely as the host's failure. net/http would have sent a replayable
// request again, on the next connection, with nothing heard of it; so
// the attempt tells nothing of its host (see call.failVerdict), and its
// retry, if any, does; unless it was the probe of a host that is down.
func (w *connWatch) finish(resp *http.Response, err error) (failed, stopped, raced bool) {
	h := &w.k.host.conns
	n := w.got.Load()
	if err == nil {
		if n > 0 && w.k.env.connless.Load() != 0 {
			w.k.env.connless.Store(0) // an answer through net/http: watch new hosts
		}
		switch c := h.Load(); {
		case resp.ProtoMajor == 2:
			if c != connsHTTP2 {
				w.k.setConns(h, connsHTTP2)
			}
		case n == 0:
			if c == connsUnknown {
				w.k.env.connless.Add(1)
				w.k.setConns(h, connsNone)
			}
		case c == connsUnknown || c == connsNone:
			w.k.setConns(h, connsHTTP1)
		}
	}
	if err == nil {
		return false, false, false
	}
	if n <= 1 {
		return false, false, n == 1 && w.reused.Load()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.h2 {
		return false, false, false
	}
	return w.failed, w.stopped, false
}

// isHTTP2 reports whether c carries HTTP/2: a TLS connection that
// negotiated h2, or one with no handshake, as net/http wraps a connection
// of unencrypted HTTP/2.
func isHTTP2(c net.Conn) bool {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return false
	}
	st := tc.ConnectionState()
	return st.NegotiatedProtocol == "h2" || !st.HandshakeComplete
}

// errReplayHeld wraps the error of an attempt whose replay by net/http
// was stopped, when its request cannot be sent again.
type errReplayHeld struct{ err error }

func (e *errReplayHeld) Error() string {
	return fmt.Sprintf("headway: net/http's replay of the request was held back while its host is down or probed: %v", e.err)
}

func (e *errReplayHeld) Unwrap() error { return e.err }
