package fakeserver

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Observer watches a client from its side of the wire: it is an
// http.RoundTripper to put under the client being tested (as its base),
// over the transport that reaches a Server. It notes when each throttled
// request left, and counts the requests the client sent inside a wait it
// had already been told of: a rejection's wait is known from the moment the
// Observer hands the rejection back to the client, which is when the
// client could first read it. The Server must set Config.TellWaits, so that
// its rejections say when their waits end (WaitHeader).
//
// The count is a bound from above: a request the client let go before it
// read the rejection, whose goroutine reaches the Observer a moment after
// the rejection was handed back, counts too (microseconds after it, in a
// burst of many workers on a loaded machine).
//
// Stats.Ignored counts from when a rejection left the server instead: on
// a loaded machine the client may read it milliseconds later, and requests
// it let go in between were sent before it knew. An Observer tells the two
// apart. It is safe for concurrent use.
type Observer struct {
	base     http.RoundTripper
	cfg      Config
	clock    serverClock
	mu       sync.Mutex
	waits    map[string]int64 // "k" or "t" and a key or token: when its known wait ends, Unix ns
	anchors  map[string]anchor
	known    int64
	throttle []throttle
}

// throttle is a throttled request: when it left, the scope of o.waits it
// was throttled in (its key's, or its token's for a global limit), and
// for an AnchoredWindow server, the key's window it left in.
type throttle struct {
	at     time.Time
	scope  string
	window int64
}

// anchor is the window of one key of an AnchoredWindow server, as the
// requests leaving say it is: the n-th began at start (Unix ns).
type anchor struct{ start, n int64 }

// NewObserver returns an Observer of the requests base sends to s.
func NewObserver(s *Server, base http.RoundTripper) *Observer {
	cfg := s.Config()
	return &Observer{base: base, cfg: cfg, clock: cfg.clock(cfg.DriftFrom), waits: make(map[string]int64), anchors: make(map[string]anchor)}
}

// RoundTrip sends req through the Observer's base, noting what it learns.
func (o *Observer) RoundTrip(req *http.Request) (*http.Response, error) {
	key, token := o.scopes(req)
	at := o.cfg.Now()
	o.mu.Lock()
	t := at.UnixNano()
	if t < o.waits[key] || t < o.waits[token] {
		o.known++
	}
	window := int64(0)
	if o.cfg.Algorithm == AnchoredWindow {
		// The first request after a window ended begins the next, as it
		// reaches the server: when it leaves here, less the time between.
		a := o.anchors[key]
		if s := o.clock.at(t); a.n == 0 || s >= a.start+int64(o.cfg.Window) || s < a.start {
			a.start, a.n = s, a.n+1
		}
		o.anchors[key], window = a, a.n
	}
	o.mu.Unlock()
	resp, err := o.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	until, global, said := parseWait(resp.Header.Get(WaitHeader))
	rejected := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusForbidden
	if !rejected && !said {
		return resp, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	scope := key
	if global {
		scope = token
	}
	if rejected {
		o.throttle = append(o.throttle, throttle{at, scope, window})
	}
	if said {
		o.waits[scope] = max(o.waits[scope], until)
	}
	return resp, nil
}

// scopes returns the names of req's key and token in o.waits.
func (o *Observer) scopes(req *http.Request) (key, token string) {
	key, token = "k", "t"
	if o.cfg.Key != nil {
		key += o.cfg.Key(req)
	}
	if o.cfg.Global.Key != nil {
		token += o.cfg.Global.Key(req)
	}
	return key, token
}

// parseWait reads a WaitHeader value: "<unix ns>" or "<unix ns>; global".
func parseWait(v string) (until int64, global, ok bool) {
	if v == "" {
		return 0, false, false
	}
	v, global = strings.CutSuffix(v, "; global")
	until, err := strconv.ParseInt(v, 10, 64)
	return until, global, err == nil
}

// Known returns the number of requests sent inside a wait the client had
// been told of: after the rejection that named it had reached the client,
// before the instant it named. A client that obeys what it reads keeps it
// at zero.
func (o *Observer) Known() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.known
}

// Throttled returns the number of throttled answers (429, or a 403 such as
// GitHub's) the client received.
func (o *Observer) Throttled() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.throttle)
}

// WorstWindow returns the most throttled requests of one key (or, for a
// Global limit, one token) that left in one window after the first: the
// server's fixed windows (on its clock, ClockSkew and ClockDrift
// included; a Global fixed window's, if shorter), after the one holding
// start; the windows of an AnchoredWindow server, after each key's first,
// as its requests leaving begin them; for a server that counts no fixed
// windows, seconds from start. A client that has learned the server's
// limit is throttled at most once a window.
func (o *Observer) WorstWindow(start time.Time) int {
	win, origin := o.cfg.Window, int64(0)
	if a := o.cfg.Algorithm; a != FixedWindow && a != SlidingWindowCounter {
		win, origin = time.Second, o.clock.at(start.UnixNano())
	}
	if g := o.cfg.Global; g.Limit > 0 && g.Algorithm == FixedWindow && (g.Window < win || origin != 0) {
		win, origin = g.Window, 0
	}
	anchored := o.cfg.Algorithm == AnchoredWindow && o.cfg.Global.Limit <= 0
	index := func(t time.Time) int64 {
		ns := o.clock.at(t.UnixNano()) - origin
		return (ns - floorMod(ns, int64(win))) / int64(win)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	type cell struct {
		scope  string
		window int64
	}
	counts := map[cell]int{}
	most := 0
	for _, th := range o.throttle {
		if anchored {
			if th.window > 1 {
				c := cell{th.scope, th.window}
				counts[c]++
				most = max(most, counts[c])
			}
			continue
		}
		if i := index(th.at); i > index(start) {
			c := cell{th.scope, i}
			counts[c]++
			most = max(most, counts[c])
		}
	}
	return most
}
