package fakeserver

import (
	"cmp"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Server is a fake rate-limited HTTP API. It is an http.Handler: it answers
// every request with the configured Handler if the request's key is within
// its limit, and with the Dialect's rejection otherwise, and it counts what
// it did (see Stats). It is safe for concurrent use.
//
// All requests are served under one lock, which makes the server exact and
// its counters consistent; it is meant for tests and demos, not for load
// beyond some tens of thousands of requests per second.
type Server struct {
	cfg   Config
	clock serverClock

	mu       sync.Mutex
	keys     map[string]*client
	globals  map[string]*client // by token, with Config.Global
	stats    Stats
	admitted []int64 // Unix nanoseconds of admitted requests, in order
	rng      *rand.Rand
	outage   [2]time.Time // [from, until) of the scheduled outage
	shaken   int          // requests held for Faults.Handshake so far
}

// client is the state of one key.
type client struct {
	lim       limiter
	notBefore int64 // the key was told to wait until then (Unix ns)
	lastSeen  int64
	// The key could know it was told to wait from heardFrom (when the
	// response that said so left) until heardUntil, Unix ns.
	heardFrom, heardUntil int64
	pen                   punishment // see Config.Penalty
	inFlight              int        // admitted and not yet answered (Config.MaxInFlight)
}

// heard notes that a response leaving at from told c to wait until until.
func (c *client) heard(from, until int64) {
	if c.heardUntil < from {
		c.heardFrom = from
	}
	c.heardUntil = max(c.heardUntil, until)
}

// ignores reports whether a request of c arriving at t was sent inside a
// wait c had been told of.
func (c *client) ignores(t int64) bool {
	return c != nil && t >= c.heardFrom && t < c.heardUntil
}

// New returns a Server for cfg; see Config for the defaults of its zero
// values.
func New(cfg Config) *Server {
	cfg = cfg.withDefaults()
	if cfg.ClockDrift != 0 && cfg.DriftFrom.IsZero() {
		cfg.DriftFrom = cfg.Now()
	}
	seed := cfg.Faults.Seed
	return &Server{
		cfg:   cfg,
		clock: cfg.clock(cfg.DriftFrom),
		keys:  make(map[string]*client),
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// Config returns the server's configuration, with defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// verdict is what the server decided for one request, under its lock.
type verdict struct {
	kind   int // one of the verdict kinds below
	status int
	body   []byte
	delay  time.Duration
	busy   *client // admitted under Config.MaxInFlight: done when answered
}

const (
	verdictAdmit = iota
	verdictRespond
	verdictReset
	verdictHang // hold the connection for delay without answering
)

// ServeHTTP answers r: with the server's Stats as JSON at Config.StatsPath,
// and otherwise as the limiter, the dialect and the faults decide.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := s.cfg.Now()
	if r.URL.Path == s.cfg.StatsPath {
		s.serveStats(w, r, now)
		return
	}
	key := ""
	if s.cfg.Key != nil {
		key = s.cfg.Key(r)
	}
	token := ""
	if s.cfg.Global.Key != nil {
		token = s.cfg.Global.Key(r)
	}
	sent := now
	if d := s.handshake(); d > 0 {
		if !sleepCtx(r.Context(), d) {
			return // the client gave up
		}
		now = s.cfg.Now()
	}
	h := make(http.Header)
	v := s.decide(now, sent, key, token, h)
	if v.busy != nil {
		defer s.answered(v.busy)
	}
	switch v.kind {
	case verdictReset:
		resetConn(w)
		return
	case verdictHang:
		hang(w, r, v.delay)
		return
	}
	if v.delay > 0 && !sleepCtx(r.Context(), v.delay) {
		return // the client gave up
	}
	wh := w.Header()
	for k, vals := range h {
		wh[k] = vals
	}
	wh.Set("Date", httpDate(s.clock.time(s.cfg.Now())))
	if v.kind == verdictAdmit {
		if s.cfg.Handler != nil {
			s.cfg.Handler.ServeHTTP(w, r)
		} else {
			serveDefault(w, r)
		}
		return
	}
	w.WriteHeader(v.status)
	_, _ = w.Write(v.body)
}

// decide counts the request arriving at now with key (sent when it came
// in: before now if Faults.Handshake held it) and decides how to answer
// it, adding the dialect's headers to h.
func (s *Server) decide(now, sent time.Time, key, token string, h http.Header) verdict {
	t, ts := now.UnixNano(), sent.UnixNano()
	at := s.clock.at(t) // the limiters' clock
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Total++
	c, g := s.keys[key], s.global(token)
	if (c != nil && t < c.notBefore) || (g != nil && t < g.notBefore) {
		s.stats.Early++
	}
	if c.ignores(ts) || g.ignores(ts) {
		s.stats.Ignored++
	}
	v := verdict{delay: s.latency()}
	if f, ok := s.fault(now, h); ok {
		f.delay += v.delay
		return f
	}
	if c == nil {
		c = s.addKey(key, t)
	}
	c.lastSeen = t
	st := State{
		Key:    key,
		Limit:  s.cfg.StatedLimit,
		Window: s.cfg.StatedWindow,
		Now:    time.Unix(0, at),
	}
	if c.punished(t) {
		return s.punish(c, t, st, h, v)
	}
	if m := s.cfg.MaxInFlight; m > 0 && c.inFlight >= m {
		return s.tooMany(c, t, st, h, v)
	}
	var d decision
	if g != nil {
		g.lastSeen = t
		if d = g.lim.take(at); !d.allowed {
			c = g // the global limit rejects it; the key's spends nothing
			st.Global = true
			st.Limit, st.Window = s.cfg.Global.Limit, s.cfg.Global.Window
		}
	}
	if !st.Global {
		d = c.lim.take(at)
	}
	st.Allowed, st.Capacity, st.Remaining = d.allowed, d.capacity, d.remaining
	st.ResetAfter, st.NextAfter, st.RetryAfter = d.resetAfter, d.nextAfter, d.retryAfter
	s.cfg.Dialect.Header(h, st)
	if d.allowed {
		s.stats.Admitted++
		s.admitted = append(s.admitted, t)
		if s.cfg.MaxInFlight > 0 {
			c.inFlight++
			v.busy = c
		}
		return v
	}
	s.stats.Rejected++
	if !st.Global {
		s.violate(c, t)
		if pb := s.cfg.Penalty.Block; pb > 0 {
			c.pen.blockedUntil = t + int64(pb)
			return s.blockAnswer(c, t, st, h, v)
		}
	}
	rej := s.cfg.Dialect.Reject(h, st)
	s.told(c, t, v, cmp.Or(rej.Wait, d.retryAfter), rej.Wait > 0, st.Global, h)
	v.kind, v.status, v.body = verdictRespond, rej.Status, rej.Body
	return v
}

// tooMany rejects a request of c that arrived at t while c had
// Config.MaxInFlight requests in progress, as the Dialect rejects, with a
// wait of a second and no quota stated: the limit is not spent. Called
// with s.mu held.
func (s *Server) tooMany(c *client, t int64, st State, h http.Header, v verdict) verdict {
	s.stats.Rejected++
	st.RetryAfter = time.Second
	rej := s.cfg.Dialect.Reject(h, st)
	s.told(c, t, v, cmp.Or(rej.Wait, st.RetryAfter), rej.Wait > 0, false, h)
	v.kind, v.status, v.body = verdictRespond, rej.Status, rej.Body
	return v
}

// answered notes that a request of c admitted under Config.MaxInFlight
// is done.
func (s *Server) answered(c *client) {
	s.mu.Lock()
	c.inFlight--
	s.mu.Unlock()
}

// global returns the global limiter of token, nil without Config.Global.
// Called with s.mu held.
func (s *Server) global(token string) *client {
	gl := &s.cfg.Global
	if gl.Limit <= 0 {
		return nil
	}
	g := s.globals[token]
	if g == nil {
		if s.globals == nil {
			s.globals = make(map[string]*client)
		}
		if len(s.globals) >= s.cfg.MaxKeys {
			clear(s.globals) // a rare reset; tests use a few tokens
		}
		g = &client{lim: newLimiterOf(gl.Algorithm, gl.Limit, gl.Window, gl.Burst)}
		s.globals[token] = g
	}
	return g
}

// addKey starts tracking key, forgetting others if there are too many.
func (s *Server) addKey(key string, now int64) *client {
	if len(s.keys) >= s.cfg.MaxKeys {
		for k, c := range s.keys {
			if now >= c.notBefore && c.lim.idle(s.clock.at(now)) && !c.punished(now) {
				delete(s.keys, k)
			}
		}
	}
	if len(s.keys) >= s.cfg.MaxKeys {
		oldest, first := "", true
		for k, c := range s.keys {
			if first || c.lastSeen < s.keys[oldest].lastSeen {
				oldest, first = k, false
			}
		}
		delete(s.keys, oldest)
	}
	c := &client{lim: newLimiter(&s.cfg)}
	s.keys[key] = c
	return c
}

func serveDefault(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Path string `json:"path"`
	}{r.URL.Path})
}
