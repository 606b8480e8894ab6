package headway

import (
	"context"
	"hash/maphash"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/headway-go/headway/ratelimitheader"
	"github.com/sony/gobreaker/v2"
)

// Transport is an http.RoundTripper that paces the requests of each key to
// its limits before handing them to a base RoundTripper. A request that
// cannot leave at once waits its turn in a bounded FIFO queue per key; a
// request that cannot be sent in time fails at once with a typed error and
// is never sent.
//
// A Transport is safe for concurrent use by multiple goroutines. It never
// modifies the request it is given, and it closes the request's body on
// every path, as http.RoundTripper requires. Make one with New: the zero
// Transport is not usable.
type Transport struct {
	keyEnv // what its keys may see of it
	base   http.RoundTripper
	parser ratelimitheader.Parser
	retry  *retryPolicy
	keys   keyTable
	obs    *observer // nil without metrics, logger or hooks
	// plain: no hooks, logs or metrics, no shared quota and no breaker:
	// nobody but the key hears of an answer (see sendPlain).
	plain bool
	// early: plain, and the stall rule is on: a first attempt with no body
	// to read is sent as soon as it leaves, if it leaves at once (see
	// keyState.sending).
	early bool
}

// New returns a Transport that sends requests through base once their key's
// limits allow. A nil base means http.DefaultTransport, and a nil option is
// ignored (an option chosen at run time, or none). New panics if an option
// holds an invalid Limit.
func New(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if cfg.queue.MaxLen == 0 {
		cfg.queue.MaxLen = defaultQueueLen
	}
	for _, l := range cfg.limits {
		mustValid(l)
	}
	for _, ls := range cfg.hostLimits {
		for _, l := range ls {
			mustValid(l)
		}
	}
	for _, r := range cfg.routeLimits {
		for _, l := range r.limits {
			mustValid(l)
		}
	}
	t := &Transport{base: base, keyEnv: keyEnv{cfg: cfg, epoch: time.Now()}}
	t.parser = ratelimitheader.Parser{Dialects: cfg.dialects, MaxServerWait: cfg.maxRetryAfter}
	t.retry = newRetryPolicy(cfg.retry)
	if !cfg.retry.Budget.Disable {
		t.budgetWidth = int64(cfg.retry.Budget.bucketWidth())
	}
	t.probe = newProbeSchedule(cfg.retry)
	if t.probe.initial > 0 {
		t.fleet, _ = cfg.shared.(SharedProber)
		t.verdict, _ = t.fleet.(SharedVerdict)
	}
	t.keys.seed, t.keys.kh = maphash.MakeSeed(), newKeyHash()
	t.hosts.learning = &t.learningHosts
	if t.obs = newObserver(cfg.obs); t.obs != nil && t.obs.m != nil {
		t.obs.m.register(t)
	}
	t.plain = t.obs == nil && cfg.shared == nil && cfg.breaker == nil
	t.early = t.plain && t.probe.initial > 0
	return t
}

func mustValid(l Limit) {
	if err := l.validate(); err != nil {
		panic(err)
	}
}

// now returns the time on the pacer's clock: nanoseconds since the
// Transport was made,
// on the monotonic clock.
func (e *keyEnv) now() int64 { return int64(time.Since(e.epoch)) }

// clock returns the wall clock, to compare with context deadlines.
func (e *keyEnv) clock() time.Time { return time.Now() }

// RoundTrip waits until req's key may send it, then sends it through the
// base RoundTripper, reads what the response says about the key's rate
// limit and adapts the key's pace to it.
//
// A throttled response (429, or a 403 or 503 that a dialect recognises as
// a limit) pauses the whole key for the wait it names. RoundTrip sends a
// request again (see WithRetry) when that is safe and fits: a throttled one
// once the key's pause is over, ahead of the key's other waiting requests;
// a 5xx or transport error of an idempotent one after a backoff. Otherwise,
// or when the wait is longer than the cap of WithMaxServerWait or the
// context's deadline, the last response goes back to the caller at once, as
// a response, not an error.
//
// RoundTrip fails without sending req when the key's queue is full
// (ErrQueueFull), when req's cost cannot fit a limit (*CostError), when the
// wait needed is longer than req's context deadline or MaxWait allow
// (*WaitError), when the key's breaker is open (*CircuitOpenError), or when
// req's context ends while it waits. A request that got no response on its
// last attempt fails with a *RetryError.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeBody(req)
		return nil, errNilURL // as net/http's Transport fails it
	}
	ctx := req.Context()
	cost := t.cfg.costOf(ctx, req)
	if cost < 0 {
		closeBody(req)
		err := &CostError{Cost: int(cost)}
		if t.obs != nil {
			t.obs.rejected(req.Context(), req, t.cfg.keyFunc(req), 1, err)
		}
		return nil, err
	}
	// Field by field: a composite literal is built aside and copied in 16
	// bytes at a time, which stalls on the 8-byte stores it was built with
	// (about 10 ns a request).
	var c call
	c.t, c.req, c.cost = t, req, cost
	c.key = t.cfg.keyFunc(req)
	c.ctx = ctx
	c.bodyOurs = req.Body != nil
	defer c.end()
	o := t.obs
	var s slot
	for {
		c.attempt++
		var asked time.Time
		if o != nil {
			asked = time.Now()
		}
		var until int64
		if c.attempt > 1 && c.r.held && t.retry.maxElapsed > 0 {
			// Held by an outage, the retry waits in the queue for as long
			// as the key's probes say, but starts within MaxElapsed or not
			// at all.
			until = t.pacerTime(c.r.start.Add(t.retry.maxElapsed))
		}
		// early: the first attempt, sent as soon as it leaves if it leaves
		// at once: nothing between could wait (a body read, a shared
		// quota's slot, a hook), and the stall rule is on. (A body of
		// http.NoBody takes the general way: sending.)
		early := t.early && c.attempt == 1 && req.Body == nil
		// A request whose context is done is not sent: it would spend a
		// slot of its key's limits (and its budget) on a request that the
		// base fails at once, or that nobody waits for.
		err := c.ctx.Err()
		if err == nil {
			err = t.admit(c.ctx, c.key, req, cost, c.attempt > 1, early, until, &s)
		}
		if o != nil {
			if err != nil {
				o.rejected(c.ctx, req, c.key, c.attempt, err)
			} else {
				o.admitted(c.ctx, req, c.key, c.attempt, time.Since(asked))
			}
		}
		if err != nil {
			return c.giveUp(err, c.ctx.Err() == nil)
		}
		out, err := c.prepare(&s)
		if err != nil {
			s.unsent()
			return c.giveUp(err, true)
		}
		var sig ratelimitheader.Signal
		var resp *http.Response
		var hv outageVerdict
		if t.plain {
			resp, hv, err = c.sendPlain(&s, out, &sig)
		} else {
			resp, hv, err = c.send(&s, out, &sig)
		}
		if err == nil && !sig.Throttled && resp.StatusCode < 400 && t.retry.check == nil {
			return s.answer(resp), nil // the common case: nothing to retry
		}
		if c.held || c.failed {
			held := c.held && c.ctx.Err() == nil
			c.held, c.failed = false, false
			if held && c.canResend() {
				// net/http's replay of the attempt was stopped before a
				// byte of it was written (see connWatch): the request
				// waits in the key's queue, behind its probe, as the
				// replay net/http would have sent, and spends no attempt.
				if c.r == nil {
					// No body, or one with GetBody: nothing is read, it cannot fail.
					c.r, _ = t.retry.newRetrier(c.req, nil, time.Now())
					c.r.rp.handed = true // the caller's body went: the next attempt's is GetBody's
				}
				c.r.held = true
				if o != nil {
					o.retry(c.ctx, req, c.key, c.attempt+1, 0, nil, err)
				}
				continue
			}
			if held {
				err = &errReplayHeld{err}
			}
		}
		delay, again := c.decide(&s, resp, err, sig, hv)
		if !again {
			if err != nil {
				return nil, c.r.fail(err)
			}
			return s.answer(resp), nil
		}
		if err == nil {
			if !c.keep(resp) {
				// Too large to hold while its retry waits, it is the
				// answer: a retry that could not be sent in time would
				// leave the caller an error for a request that got a
				// response (see maxBufferedThrottle).
				return s.answer(resp), nil
			}
			s.free()
		}
		if sig.Throttled || c.r.held {
			// The key's pause and pace, or its probes, say when it goes
			// again: a retry queues ahead of new work as soon as they
			// allow it.
			delay = 0
		}
		if o != nil {
			o.retry(c.ctx, req, c.key, c.attempt+1, delay, resp, err)
		}
		if err := sleep(c.ctx, delay); err != nil {
			return nil, c.r.fail(err)
		}
	}
}

// call is one RoundTrip: the request, its attempts, and what it owns until
// it returns. end, deferred once, gives back what the caller does not get:
// the request's body while no attempt or retrier has taken it, the
// retrier's copy of it, the response kept while a retry waits, and the
// retry budget a retry withdrew that was not sent. A slot
// of the key, held by one attempt from admit until it ends, is given back
// through the slot's methods.
type call struct {
	t    *Transport
	req  *http.Request
	key  string
	ctx  context.Context
	cost int64

	attempt  int            // the attempt under way, from 1
	held     bool           // net/http's replay of the attempt was stopped (see connWatch)
	hung     bool           // the caller gave up on the attempt, sent to a host that hangs (see keyState.hung)
	failed   bool           // the replay or probe the attempt held broke again (see connWatch)
	raced    bool           // the attempt broke on a pooled connection, not sent again (see connWatch.finish)
	r        *retrier       // the retries; made when the first attempt leaves, for a body
	ownsBody bool           // r holds the request's body: end closes it through r
	bodyOurs bool           // nothing took the request's body yet: end closes it
	probe    bool           // the attempt under way is its key's probe of a host that is down
	last     *http.Response // the last response, kept while its retry waits
}

// end gives back what the call still holds as RoundTrip returns. The test
// that it holds nothing, the common case, is inlined: a call without a
// retrier (no body, no retry) holds neither a copy of its body nor a retry.
func (c *call) end() {
	if c.bodyOurs || c.last != nil || c.r != nil {
		c.giveBack()
	}
}

func (c *call) giveBack() {
	if c.bodyOurs {
		closeBody(c.req)
	}
	if c.last != nil {
		c.last.Body.Close()
	}
	if c.ownsBody {
		c.r.close()
	}
	if c.r != nil {
		c.r.refund()
	}
}

// giveUp ends a call whose attempt was not sent with err: the last
// response is the answer instead, if there is one and lastOK.
func (c *call) giveUp(err error, lastOK bool) (*http.Response, error) {
	if c.last != nil && lastOK {
		resp := c.last
		c.last = nil
		return resp, nil // no retry in time: the last response is the answer
	}
	if c.r != nil {
		err = c.r.fail(err)
	}
	return nil, err
}

// canResend reports whether the call's request can be sent again with
// the same body: it has none, or its retrier can replay it, or (no
// retrier: retries are off) GetBody gives it again, as net/http would.
func (c *call) canResend() bool {
	if c.r != nil {
		return c.r.rp.canReplay()
	}
	return c.req.Body == nil || c.req.Body == http.NoBody || c.req.GetBody != nil
}

// keep holds resp, a response about to be retried, as the answer should
// the retry not be sent: a copy of it, with its original body read and
// closed so that its connection is reused. It reports false, and leaves
// resp readable from the start, when its body is too large to hold.
func (c *call) keep(resp *http.Response) bool {
	if resp.Body == nil {
		// A base that breaks the RoundTripper contract: the kept response
		// is closed later, as http.Client would read it, empty.
		resp.Body = http.NoBody
	}
	c.last = buffer(resp, maxBufferedThrottle)
	return c.last != nil
}

// prepare returns the request to send as the attempt of slot s: the first
// attempt counts on the key's budget and, for a body that may be sent
// again, makes the retrier that holds it.
func (c *call) prepare(s *slot) (*http.Request, error) {
	if c.attempt == 1 {
		s.k.countRequest(s.dep.at) // the budget's epoch is t's
		if c.bodyOurs && c.req.Body != http.NoBody && c.t.retry.maxAttempts > 1 {
			// A body that may be sent again is read into memory only once
			// its request may leave: a queued request holds no more than
			// it was given.
			c.bodyOurs = false // newRetrier closes it if it fails
			r, err := c.t.retry.newRetrier(c.req, nil, time.Now())
			if err != nil {
				return nil, err
			}
			c.r, c.ownsBody = r, true
		}
	}
	out := c.req
	if c.r != nil {
		var err error
		if out, err = c.r.attempt(); err != nil {
			return nil, err
		}
	}
	if c.last != nil {
		c.last.Body.Close()
		c.last = nil
	}
	if s.k.isProbe(s.dep.seq) {
		out = probeRequest(out)
	}
	return out, nil
}

// probeRequest returns a copy of req, a probe of a host that is down, that
// net/http's Transport does not send again by itself. It does so, unasked,
// with a request that is replayable (an idempotent method, or an
// Idempotency-Key, with no body or a GetBody) when a reused connection
// breaks before the answer: a host that resets connections would get a
// probe once per pooled connection. A body without GetBody makes a request
// not replayable; a GET, HEAD or OPTIONS without a body gets an empty one,
// which net/http finds empty before it writes the request and sends as no
// body at all (over HTTP/2, as an empty end of stream). Other methods
// without a body keep none (sent with an empty body, they would go
// chunked): those net/http replays only with an Idempotency-Key.
func probeRequest(req *http.Request) *http.Request {
	p := new(http.Request)
	*p = *req // the probe is the caller's request: its header is read, not written
	switch {
	case p.Body != nil && p.Body != http.NoBody:
	case p.Method == "", p.Method == http.MethodGet, p.Method == http.MethodHead, p.Method == http.MethodOptions:
		p.Body, p.ContentLength = emptyBody{}, 0
	}
	p.GetBody = nil
	return p
}

// emptyBody is a request body that is empty, and not http.NoBody.
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }

// send sends out, the attempt of slot s, and tells the key, its breaker,
// its host and the shared quota what came back. After an error the slot is
// given back; after a response it is held until the response is answered
// or retried.
func (c *call) send(s *slot, out *http.Request, sig *ratelimitheader.Signal) (*http.Response, outageVerdict, error) {
	t, k, o, ctx := c.t, s.k, c.t.obs, c.ctx
	wasDown := k.isDown()
	wasProbe := wasDown && k.isProbe(s.dep.seq)
	c.probe, c.hung = wasProbe, false
	// Nothing between the departure and here could wait (see sending):
	// no shared quota, no retrier (a body read, a retry), no hook.
	k.sending(&s.dep, s.dep.direct && c.r == nil && o == nil && t.cfg.shared == nil)
	var resp *http.Response
	var err error
	if k.watchConns(s.dep.seq) {
		resp, err = c.sendWatched(s, out)
	} else {
		c.raced = false
		resp, err = t.base.RoundTrip(out)
	}
	c.bodyOurs = false // the base closes it
	if resp == nil && err == nil {
		err = errNilResponse // a broken base: an error, not a panic
	}
	downBefore := t.fleet != nil && k.isDown() // before this answer settles
	if o != nil {
		o.sent(ctx, c.req, c.key, err)
	}
	var hv outageVerdict
	if err != nil {
		hv = c.sendFailed(s, err)
	} else {
		hv = t.observe(ctx, k, &s.dep, c.req.URL.Path, resp, sig)
	}
	if k.br != nil {
		switch {
		case c.hung:
			s.done(outcomeFailure) // the host hangs (see keyState.hung)
		case c.held || (c.raced && !wasProbe):
			// It waits for the probe, not the breaker; or it met a
			// closed idle connection, no failure of the host.
			s.done(outcomeExcluded)
		default:
			// After observe, which read sig: a 503 that states its
			// wait is a throttle, as it is to the outage state.
			s.done(classify(resp, err, ctx.Err(), err == nil && sig.Throttled && sig.HasWait))
		}
	}
	if err == nil {
		if o != nil && sig.HasWait && sig.Wait > t.cfg.maxRetryAfter {
			o.capped(ctx, c.req, c.key, resp.StatusCode, sig.Wait, t.cfg.maxRetryAfter)
		}
		if t.cfg.shared != nil {
			t.pauseShared(ctx, c.key, sig)
			t.learnShared(ctx, c.key, k, s.dep, sig)
		}
	}
	if t.cfg.shared != nil {
		t.shareHealth(ctx, c.key, k, hv, wasDown, wasProbe, downBefore)
	}
	k.strikeAnswered(&s.dep, err != nil || hv == hostDown || sig.Throttled)
	k.seenDep(&s.dep, err == nil && !sig.Throttled)
	if o != nil {
		o.outage(ctx, c.req, c.key, k)
	}
	if err == nil && sig.Throttled && o != nil {
		o.throttled(ctx, c.req, c.key, c.attempt, resp, sig, t.cfg.maxRetryAfter)
	}
	return resp, hv, err
}

// sendFailed settles the attempt of slot s, which got err and no response,
// and gives the slot back. If the caller gave up, it notes whether on a
// host that hangs (c.hung, see gaveUp).
func (c *call) sendFailed(s *slot, err error) outageVerdict {
	k := s.k
	if c.ctx.Err() != nil {
		c.gaveUp(s)
	}
	hv := c.failVerdict(err)
	k.settle(&s.dep, hv)
	k.unanswered(&s.dep)
	k.endProbe()
	s.free()
	return hv
}

// sendPlain is send when nobody else hears of the answer (see
// Transport.plain): no hooks, logs or metrics, no shared quota (nor its
// fleet) and no breaker. It does what send does for the key alone, with
// fewer values to keep across the base's RoundTrip.
func (c *call) sendPlain(s *slot, out *http.Request, sig *ratelimitheader.Signal) (*http.Response, outageVerdict, error) {
	k := s.k
	c.probe, c.hung = k.isProbe(s.dep.seq), false
	k.sending(&s.dep, s.dep.direct && c.r == nil)
	var resp *http.Response
	var err error
	if k.watchConns(s.dep.seq) {
		resp, err = c.sendWatched(s, out)
	} else {
		c.raced = false
		resp, err = c.t.base.RoundTrip(out)
	}
	c.bodyOurs = false // the base closes it
	if resp == nil && err == nil {
		err = errNilResponse // a broken base: an error, not a panic
	}
	var hv outageVerdict
	if err != nil {
		hv = c.sendFailed(s, err)
	} else if c.t.parser.Relevant(resp.StatusCode, resp.Header) {
		hv = c.t.observeSignal(c.ctx, k, &s.dep, c.req.URL.Path, resp, sig)
	} else {
		hv = c.t.observeQuiet(c.ctx, k, &s.dep, resp, sig)
	}
	k.strikeAnswered(&s.dep, err != nil || hv == hostDown || sig.Throttled)
	k.seenDep(&s.dep, err == nil && !sig.Throttled)
	return resp, hv, err
}

// gaveUp notes that the caller gave up on the attempt of slot s before an
// answer came: no answer (the silence a stall is counted in goes on), and,
// if the host has been silent since the attempt left for longer than a
// stall takes to show, a host that hangs (see keyState.hung).
func (c *call) gaveUp(s *slot) {
	s.dep.gaveUp = true
	c.hung = !c.held && s.k.hung(&s.dep, c.probe, s.k.env.now())
}

// sendWatched sends out, the attempt of slot s, through the base, and
// watches net/http's replays of it (see connWatch), where its key's host
// is watched (see keyState.watchConns): c.held then reports that one was
// stopped, and c.failed that the key's replay or probe the attempt held
// broke again.
func (c *call) sendWatched(s *slot, out *http.Request) (*http.Response, error) {
	w, out := newConnWatch(out, s.k, s.dep.seq)
	resp, err := c.t.base.RoundTrip(out)
	if resp == nil && err == nil {
		err = errNilResponse // a broken base: an error, not a panic
	}
	c.failed, c.held, c.raced = w.finish(resp, err)
	return resp, err
}

// failVerdict is what err, the failure of the call's attempt, tells of
// its host (see sendWatched).
func (c *call) failVerdict(err error) outageVerdict {
	hv := hostVerdict(nil, err, c.ctx.Err(), nil)
	switch {
	case c.hung:
		hv = hostDown // its caller gave up on a host that hangs
	case hv == hostUnknown:
	case c.held:
		hv = hostUnknown // the replay or probe out says
	case c.failed:
		hv = hostDown
	case c.raced && !c.probe:
		// A closed idle connection, or the host: its retry tells. (A
		// probe's break is the host's: probes are not sent again.)
		hv = hostUnknown
	}
	return hv
}

// decide reports whether the attempt of slot s, which ended with resp or
// err, is sent again, and after what delay.
func (c *call) decide(s *slot, resp *http.Response, err error, sig ratelimitheader.Signal, hv outageVerdict) (time.Duration, bool) {
	k := s.k
	if c.r == nil {
		c.r, _ = c.t.retry.newRetrier(c.req, nil, time.Now()) // no body: cannot fail
	}
	c.r.budget = k.retryBudget()
	k.flushBudget(c.t.now() / int64(max(k.budgetWidth(), 1)))
	c.r.held = hv == hostDown && k.isDown()
	// In hold mode an outage costs a request nothing: a probe that failed
	// spends neither an attempt nor the budget (see BreakerSettings.Hold).
	c.r.heldProbe = c.r.held && c.probe && k.br != nil && k.br.hold
	delay, again := c.r.next(resp, err, sig, time.Now())
	if again && k.br != nil && !k.br.hold && k.br.state() == BreakerOpen {
		again = false // the attempt that opened the breaker is the answer
	}
	return delay, again
}

// slot is an attempt's place on its key, from admit until the attempt
// ends: the key's departure, its in-flight slot, and its breaker's
// outcome callback. An attempt ends in one of four ways, each of which
// gives its in-flight slot back once: unsent; sent and failed (send frees
// it); answered (the response's body frees it); retried (freed at once).
type slot struct {
	k    *keyState
	dep  departure
	cost int64         // what it took of the key's limits
	done func(outcome) // nil: nothing to report
}

// unsent gives back the slot of an attempt that was not sent: every
// departure is settled once, its cost given back to the key's limits, its
// in-flight slot freed, and its outcome taken in.
func (s *slot) unsent() {
	if s.done != nil {
		s.done(outcomeExcluded)
	}
	s.k.giveBack(s.cost)
	s.k.settle(&s.dep, hostUnsent)
	s.k.strikeAnswered(&s.dep, true)
	s.k.unsentFirst(s.dep.seq)
	s.k.unanswered(&s.dep)
	s.k.release()
	s.k.withdraw()
	if s.k.capping.Load() {
		s.k.concFreed(&s.dep, false)
	}
}

// answer returns resp, the answer to s's attempt, with its body set to
// give back the in-flight slot when read to the end or closed.
func (s *slot) answer(resp *http.Response) *http.Response {
	if s.k.env.cfg.maxInFlight <= 0 {
		return resp
	}
	return s.answerBounded(resp)
}

func (s *slot) answerBounded(resp *http.Response) *http.Response {
	k := s.k
	if resp.Body == nil {
		k.release()
		return resp
	}
	if _, ok := resp.Body.(io.Writer); ok {
		// A switched protocol (101) body is a connection, not a response to
		// read to the end: it no longer counts as in flight.
		k.release()
		return resp
	}
	resp.Body = &releaseBody{ReadCloser: resp.Body, k: k}
	return resp
}

// free gives back the in-flight slot of s's attempt, which was sent.
func (s *slot) free() { s.k.release() }

// noDone is the breaker outcome callback of a key without a breaker.
var noDone = func(outcome) {}

// admit finds the key's state, asks its breaker, if any, and waits in its
// queue for a slot, which it writes to s (front, early and until as for
// keyState.acquire). The slot's done must be called with the outcome of the
// request, which is sent at once.
func (t *Transport) admit(ctx context.Context, key string, req *http.Request, cost int64, front, early bool, until int64, s *slot) error {
	if t.cfg.shared == nil && t.cfg.breaker == nil {
		// Nothing but the key admits: no breaker, no shared quota (nor its
		// fleet).
		for {
			k := t.keys.get(key, t, req)
			s.k, s.cost, s.done = k, cost, noDone
			if err := k.acquire(ctx, cost, front, early, until, req.URL.Path, &s.dep); err != errEvicted {
				return err
			}
		}
	}
	var queued time.Time // read only by the shared quota: no clock read without one
	if t.cfg.shared != nil {
		queued = time.Now()
	}
	for {
		k := t.keys.get(key, t, req)
		done := noDone
		if k.br != nil && !k.br.hold {
			var err error
			if done, err = k.br.allow(time.Now()); err != nil {
				return err
			}
		}
		if k.br != nil && k.br.hold && k.br.state() == BreakerOpen {
			// Hold: the queue waits for the breaker's probe, and a request
			// that cannot wait that long fails at once.
			k.hold(t.pacerTime(k.br.retryAt()))
		}
		s.k, s.cost, s.done = k, cost, done
		err := k.acquire(ctx, cost, front, early, until, req.URL.Path, &s.dep)
		switch {
		case err == errEvicted:
			done(outcomeExcluded)
			continue
		case err != nil:
			done(outcomeExcluded)
			return err
		}
		if k.br != nil && k.br.hold {
			// Hold: the breaker is asked as the request leaves. When it
			// is open, the request goes back to the front of the queue,
			// which waits for the breaker's probe.
			var coe *CircuitOpenError
			if s.done, coe = k.br.allowHold(time.Now()); coe != nil {
				s.done = nil
				s.unsent()
				k.hold(t.pacerTime(coe.RetryAt))
				front = true
				continue
			}
		}
		if k.br != nil && !k.br.hold && k.br.state() == BreakerOpen {
			// The breaker opened while the request waited its turn (it
			// asked before, and queued after the failure that opened it
			// failed the queue): it does not leave.
			s.unsent()
			return k.br.openError(gobreaker.ErrOpenState, time.Now())
		}
		p := t.prober()
		turn := false
		if p != nil {
			// The fleet reports the host down: the request waits with the
			// others, unless it is the probe whose turn it is.
			var recheck, next time.Duration
			var ok bool
			if recheck, next, ok, turn = t.fleetGate(ctx, p, key, k, s.dep.seq); !ok {
				k.fleetHold(recheck, next)
				s.unsent()
				front = true
				continue
			}
		}
		if t.cfg.shared != nil {
			if err := t.reserveShared(ctx, key, k, cost, queued); err != nil {
				s.unsent()
				return err
			}
		}
		if p != nil && !turn {
			if down, next := p.HostState(key); down {
				// Down since the request reserved its slot.
				k.fleetHold(next, next)
				s.unsent()
				front = true
				continue
			}
			if _, _, stalls := k.stalls(t.now()); stalls {
				// The key's requests began to stall while this one waited
				// for its slot: it waits in the queue.
				s.unsent()
				front = true
				continue
			}
		}
		if k.br != nil && !k.br.hold {
			s.done = k.watchBreaker(s.done)
		}
		return nil
	}
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// observe reads what resp, the response to departure dep of k, says about
// its key's rate limit and its host's health, into sig (zero when it is
// called), and tells the key: the host's health first, so that a failure
// holds the queue before anything lets it go. A response that says nothing
// costs no lock.
func (t *Transport) observe(ctx context.Context, k *keyState, dep *departure, route string, resp *http.Response, sig *ratelimitheader.Signal) outageVerdict {
	if !t.parser.Relevant(resp.StatusCode, resp.Header) {
		return t.observeQuiet(ctx, k, dep, resp, sig)
	}
	return t.observeSignal(ctx, k, dep, route, resp, sig)
}

// observeQuiet is observe for a response that says nothing about its
// key's rate limit (see Parser.Relevant): its host's health, and its Date
// while the host's clock is not known well.
func (t *Transport) observeQuiet(ctx context.Context, k *keyState, dep *departure, resp *http.Response, sig *ratelimitheader.Signal) outageVerdict {
	if k.readsDate(dep.seq) && len(resp.Header["Date"]) > 0 {
		t.observeDate(k, *dep, resp, t.now()) // until the offset is known well
	}
	hv := hostVerdict(resp, nil, ctx.Err(), sig)
	k.settle(dep, hv)
	k.endProbe()
	k.answered(dep)
	return hv
}

// observeSignal is observe for a response that may say something about
// its key's rate limit.
func (t *Transport) observeSignal(ctx context.Context, k *keyState, dep *departure, route string, resp *http.Response, sig *ratelimitheader.Signal) outageVerdict {
	in := ratelimitheader.Input{Status: resp.StatusCode, Header: resp.Header}
	if resp.StatusCode >= 400 {
		in.Body = peek(resp, maxPeek)
	}
	in.Now = time.Now()
	off, ok := k.host.clockOffset(in.Now)
	if ok {
		in.ServerNow = in.Now.Add(off)
	}
	in.MillisecondResets = k.host.msDeltas.Load()
	in.MillisecondDelays = k.host.msDelays.Load()
	*sig = t.parser.Parse(&in)
	if sig.MillisecondDelay && !in.MillisecondDelays {
		// A server states its delays alike: those that come without a
		// window to show their unit (Discord's global limit before API v8)
		// count milliseconds too.
		k.host.msDelays.Store(true)
	}
	if !in.MillisecondResets && sig.Reset > 0 && k.host.learnResetUnit(k, in.Now, sig.Reset) {
		// This response and the key's last one showed the host's resets
		// to count milliseconds: read it again so.
		in.MillisecondResets = true
		*sig = t.parser.Parse(&in)
	}
	kind := overloadOutage
	if overloaded(resp.StatusCode, sig) && t.probe.initial > 0 {
		// An overload without a stated delay: the host is down for now, and
		// its probes, not a cut in the key's pace, say when it is back;
		// unless a limit's (see overloadLimit).
		if kind = k.overloadLimit(t.now(), dep.seq, t.heardLimit(k)); kind != overloadThrottle {
			sig.Throttled = false
		}
	}
	hv := hostVerdict(resp, nil, ctx.Err(), sig)
	if kind != overloadOutage {
		hv = hostUp // the host answers: a limit refused the pace, or a trial's
	}
	k.settle(dep, hv)
	if !sig.Throttled && !sig.HasWait && !sig.HasRemaining && sig.Limit == 0 {
		k.endProbe()
		k.answered(dep)
		return hv
	}
	now := t.now()
	t.observeDate(k, *dep, resp, now)
	srv := in.ServerTime()
	coarse := k.host.resetPrecision(sig.Reset, srv)
	rc := readClock{reset: off}
	switch {
	case !ok && coarse:
		// Read against the response's Date (or a delay in whole seconds,
		// which is as coarse).
		rc.reset = srv.Sub(in.Now)
	case !absolute(sig.Reset, srv):
		rc.reset = 0 // a delay is measured on our clock
	}
	if ok && absolute(sig.Wait, srv) {
		rc.wait, rc.waitAt = off, true // a Retry-After date
	}
	k.observe(now, *dep, route, sig, coarse, rc)
	return hv
}

// resetPrecision reports whether reset, read against srv, the server's
// clock at receipt, is stated to the second only: a delta in whole
// seconds, or an instant in whole seconds (an epoch or a date), whatever
// its fraction after the clock offset is taken off. A delta stated to the
// millisecond is whole by chance (Discord's Reset-After of 1.000, for a
// request counted right at its window's start; answers on a millisecond
// grid land on whole seconds one time in a thousand, or more): once one of
// the host's answers stated a delta to the millisecond (a whole number of
// milliseconds that is not whole seconds, to an instant that is not
// whole), its whole ones are read as precise too. (The parser does not say
// how a value was written; a server states every reset of a host alike.)
func (h *hostState) resetPrecision(reset time.Duration, srv time.Time) (coarse bool) {
	whole := srv.Add(reset).Nanosecond() == 0
	if reset%time.Second == 0 || whole {
		return !h.msResets.Load()
	}
	if reset%time.Millisecond == 0 && !h.msResets.Load() {
		h.msResets.Store(true)
	}
	return false
}

// absolute reports whether reset was stated as an instant on the server's
// clock, srv (an epoch or a date, to the second or the millisecond): the
// instant is whole and the delay to it is not.
func absolute(reset time.Duration, srv time.Time) bool {
	at := srv.Add(reset).UnixNano()
	for _, u := range []int64{int64(time.Second), int64(time.Millisecond)} {
		if int64(reset)%u != 0 && at%u == 0 {
			return true
		}
	}
	return false
}

// observeDate narrows the offset of k's host's clock with resp's Date, the
// response to dep received at now.
func (t *Transport) observeDate(k *keyState, dep departure, resp *http.Response, now int64) {
	if v := resp.Header["Date"]; len(v) > 0 {
		if date, err := http.ParseTime(v[0]); err == nil && saneDate(date, t.wall(now)) {
			k.host.observeDate(date, t.wall(dep.sent), t.wall(now))
		}
	}
}

// wall converts a time on the pacer's clock to the wall clock.
func (e *keyEnv) wall(ns int64) time.Time { return e.epoch.Add(time.Duration(ns)) }

// pacerTime converts a wall-clock time to the pacer's clock; the zero time
// is now.
func (t *Transport) pacerTime(at time.Time) int64 {
	if at.IsZero() {
		return t.now()
	}
	return int64(at.Sub(t.epoch))
}

func (t *Transport) newKey(key string, req *http.Request) *keyState {
	lims := t.cfg.limitsFor(req)
	k := &keyState{env: &t.keyEnv, lims: lims}
	k.pacer.init(lims)
	if t.cfg.shared != nil {
		k.sharedLims = withReserve(lims)
		_, learns := t.cfg.shared.(SharedLearner)
		k.fleetPaced = learns && len(lims) == 0
	}
	k.host = t.hosts.get(req.URL.Host)
	k.scope = k.host.scope(credential(t.keys.seed, req))
	if t.fleet != nil {
		k.out.stall = &fleetStall{key: key, timer: time.AfterFunc(time.Hour, func() { t.onStall(key, k) }), told: make(chan struct{}, 1)}
		k.out.stall.timer.Stop() // see sending
	}
	if t.cfg.breaker != nil {
		s := *t.cfg.breaker
		if t.obs != nil {
			s.OnStateChange = t.obs.breakerHook(key, k.host.name, s.OnStateChange)
		}
		if s.Hold && s.Timeout <= 0 && t.probe.initial > 0 {
			// Held requests wait for the next probe: the outage state's
			// schedule spaces the probes (never closer than its initial
			// interval), not the fail-fast default of 30 s.
			s.Timeout = t.probe.initial / 2
		}
		k.br = newBreaker(key, s)
		k.br.hold = s.Hold
	}
	// Until the first answer, one request finds out what the server allows:
	// a configured limit is what its documentation says, and a server's
	// burst may be smaller.
	k.probing.Store(true)
	if len(lims) == 0 {
		k.model.track() // its pace will come from what the server says
	}
	k.model.spread = t.cfg.spread
	k.rare = k.rareNow(0)
	return k
}

// CloseIdleConnections closes the idle connections of the base
// RoundTripper, if it has such a method.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// closeBody closes the body of a request that will not be sent.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// releaseBody gives back its request's in-flight slot when the response
// body is read to its end or closed, whichever comes first.
type releaseBody struct {
	io.ReadCloser
	k    *keyState
	once sync.Once
}

func (b *releaseBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.k.release)
	}
	return n, err
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.k.release)
	return err
}

// maxDateSkew is how far a response's Date may be from the local clock and
// still be taken for the server's clock, as package ratelimitheader takes
// it: further off, it is broken.
const maxDateSkew = 30 * 24 * time.Hour

// saneDate reports whether date, a response's Date, is within maxDateSkew
// of now.
func saneDate(date, now time.Time) bool {
	d := date.Sub(now)
	return d <= maxDateSkew && d >= -maxDateSkew
}
