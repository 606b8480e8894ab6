package headway

import (
	"context"
	"hash/maphash"
	"io"
	"net/http"
	"sync"
	"time"

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
// every path, as http.RoundTripper requires.
type Transport struct {
	keyEnv // what its keys may see of it
	base   http.RoundTripper
	parser SignalParser
	retry  *retryPolicy
	keys   keyTable
	obs    *observer // nil without metrics, logger or hooks
}

// New returns a Transport that sends requests through base once their key's
// limits allow. A nil base means http.DefaultTransport. New panics if an
// option holds an invalid Limit.
func New(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
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
	t.parser = SignalParser{Dialects: cfg.dialects, MaxServerWait: cfg.maxRetryAfter}
	t.retry = newRetryPolicy(cfg.retry)
	t.probe = newProbeSchedule(cfg.retry)
	t.keys.seed = maphash.MakeSeed()
	if t.obs = newObserver(cfg.obs); t.obs != nil && t.obs.m != nil {
		t.obs.m.register(t)
	}
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
// or when the wait is longer than MaxRetryAfter or the context's deadline,
// the last response goes back to the caller at once, as a response, not an
// error.
//
// RoundTrip fails without sending req when the key's queue is full
// (ErrQueueFull), when req's cost cannot fit a limit (*CostError), when the
// wait needed is longer than req's context deadline or MaxWait allow
// (*WaitError), when the key's breaker is open (*CircuitOpenError), or when
// req's context ends while it waits. A request that got no response on its
// last attempt fails with a *RetryError.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	cost := t.cfg.costOf(req)
	if cost < 0 {
		closeBody(req)
		err := &CostError{Cost: int(cost)}
		if t.obs != nil {
			t.obs.rejected(req.Context(), req, t.cfg.keyFunc(req), 1, err)
		}
		return nil, err
	}
	key := t.cfg.keyFunc(req)
	ctx := req.Context()
	o := t.obs
	var (
		r    *retrier       // the retries; made when the first attempt leaves, for a body
		last *http.Response // the last response, kept while its retry waits
	)
	// A body that may be sent again is read into memory only once its
	// request may leave: a queued request holds no more than it was given.
	replay := req.Body != nil && req.Body != http.NoBody && t.retry.maxAttempts > 1
	for attempt := 1; ; attempt++ {
		var asked time.Time
		if o != nil {
			asked = time.Now()
		}
		k, dep, done, err := t.admit(ctx, key, req, cost, attempt > 1)
		if o != nil {
			if err != nil {
				o.rejected(ctx, req, key, attempt, err)
			} else {
				o.admitted(ctx, req, key, attempt, time.Since(asked))
			}
		}
		if err != nil {
			switch {
			case attempt == 1 && r == nil:
				closeBody(req)
			case last != nil && ctx.Err() == nil:
				return last, nil // no retry in time: the last response is the answer
			case last != nil:
				last.Body.Close()
			}
			if attempt > 1 {
				err = r.fail(err)
			}
			return nil, err
		}
		if attempt == 1 {
			k.countRequest(dep.at) // the budget's epoch is t's
			if replay {
				if r, err = t.retry.newRetrier(req, nil, time.Now()); err != nil {
					done(outcomeExcluded)
					k.settle(dep, hostUnknown)
					k.release()
					k.seen()
					return nil, err // the body is closed
				}
				defer r.close()
			}
		}
		out := req
		if r != nil {
			if out, err = r.attempt(); err != nil {
				done(outcomeExcluded)
				k.settle(dep, hostUnknown)
				k.release()
				k.seen()
				if last != nil {
					return last, nil
				}
				return nil, r.fail(err)
			}
		}
		if last != nil {
			last.Body.Close()
			last = nil
		}
		if k.isProbe(dep.seq) {
			// A probe goes on a connection of its own: the pooled ones may
			// be dead, and net/http sends a request that meets a dead
			// reused connection a second time, unasked.
			out = out.Clone(out.Context())
			out.Close = true
		}
		k.sending()
		resp, err := t.base.RoundTrip(out)
		if resp == nil && err == nil {
			err = errNilResponse // a broken base: an error, not a panic
		}
		if o != nil {
			o.sent(ctx, req, key, err)
		}
		if k.br != nil {
			done(classify(resp, err, ctx.Err()))
		}
		var (
			sig Signal
			hv  outageVerdict
		)
		if err != nil {
			hv = hostVerdict(nil, err, ctx.Err(), &sig)
			k.settle(dep, hv)
			k.endProbe()
			k.release()
		} else {
			sig, hv = t.observe(ctx, k, dep, req.URL.Path, resp)
			if o != nil && sig.HasWait && sig.Wait > t.cfg.maxRetryAfter {
				o.capped(ctx, req, key, resp.StatusCode, sig.Wait, t.cfg.maxRetryAfter)
			}
			t.pauseShared(ctx, key, &sig)
			t.learnShared(ctx, key, k, &sig)
		}
		k.seen()
		if err == nil {
			if !sig.Throttled && resp.StatusCode < 400 && t.retry.check == nil {
				return t.track(k, resp), nil // the common case: nothing to retry
			}
			if sig.Throttled {
				if o != nil {
					o.throttled(ctx, req, key, attempt, resp, &sig, t.cfg.maxRetryAfter)
				}
			}
		}
		if r == nil {
			r, _ = t.retry.newRetrier(req, nil, time.Now()) // no body: cannot fail
		}
		r.budget = k.budget
		k.flushBudget(t.now() / int64(max(k.budgetWidth(), 1)))
		r.held = hv == hostDown && k.isDown()
		delay, again := r.next(resp, err, sig, time.Now())
		if again && k.br != nil && !k.br.hold && k.br.state() == BreakerOpen {
			again = false // the attempt that opened the breaker is the answer
		}
		if !again {
			if err != nil {
				return nil, r.fail(err)
			}
			return t.track(k, resp), nil
		}
		if err == nil {
			if last = buffer(resp, maxBufferedThrottle); last == nil {
				drainAndClose(resp)
			}
			k.release()
		}
		if sig.Throttled || r.held {
			// The key's pause and pace, or its probes, say when it goes
			// again: a retry queues ahead of new work as soon as they
			// allow it.
			delay = 0
		}
		if o != nil {
			o.retry(ctx, req, key, attempt+1, delay, resp, err)
		}
		if err := sleep(ctx, delay); err != nil {
			if last != nil {
				last.Body.Close()
			}
			return nil, r.fail(err)
		}
	}
}

// noDone is the breaker outcome callback of a key without a breaker.
var noDone = func(outcome) {}

// admit finds the key's state, asks its breaker, if any, and waits in its
// queue for a slot. done must be called with the outcome of the request,
// which is sent at once.
func (t *Transport) admit(ctx context.Context, key string, req *http.Request, cost int64, front bool) (*keyState, departure, func(outcome), error) {
	queued := time.Now()
	for {
		k := t.keys.get(key, t, req)
		done := noDone
		if k.br != nil && !k.br.hold {
			var err error
			if done, err = k.br.allow(time.Now()); err != nil {
				return nil, departure{}, nil, err
			}
		}
		if k.br != nil && k.br.hold && k.br.state() == BreakerOpen {
			// Hold: the queue waits for the breaker's probe, and a request
			// that cannot wait that long fails at once.
			k.hold(t.pacerTime(k.br.retryAt()))
		}
		dep, err := k.acquire(ctx, cost, front, req.URL.Path)
		switch {
		case err == errEvicted:
			done(outcomeExcluded)
			continue
		case err != nil:
			done(outcomeExcluded)
			return nil, departure{}, nil, err
		}
		if k.br != nil && k.br.hold {
			// Hold: the breaker is asked as the request leaves. When it
			// is open, the request goes back to the front of the queue,
			// which waits for the breaker's probe.
			var coe *CircuitOpenError
			if done, coe = k.br.allowHold(time.Now()); coe != nil {
				k.settle(dep, hostUnknown)
				k.release()
				k.seen()
				k.hold(t.pacerTime(coe.RetryAt))
				front = true
				continue
			}
		}
		if k.br != nil && !k.br.hold && k.br.state() == BreakerOpen {
			// The breaker opened while the request waited its turn (it
			// asked before, and queued after the failure that opened it
			// failed the queue): it does not leave.
			done(outcomeExcluded)
			k.settle(dep, hostUnknown)
			k.release()
			k.seen()
			return nil, departure{}, nil, k.br.openError(gobreaker.ErrOpenState, time.Now())
		}
		if err := t.reserveShared(ctx, key, k, cost, queued); err != nil {
			done(outcomeExcluded)
			k.settle(dep, hostUnknown)
			k.release()
			k.seen()
			return nil, departure{}, nil, err
		}
		if k.br != nil && !k.br.hold {
			done = k.watchBreaker(done)
		}
		return k, dep, done, nil
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
// its key's rate limit and its host's health, and tells the key: the host's
// health first, so that a failure holds the queue before anything lets it
// go. A response that says nothing costs no lock.
func (t *Transport) observe(ctx context.Context, k *keyState, dep departure, route string, resp *http.Response) (Signal, outageVerdict) {
	fam := scanHeader(resp.Header)
	if !t.parser.mayCarry(resp.StatusCode, fam) {
		if k.host.wantDates.Load() {
			t.observeDate(k, dep, resp, t.now()) // until the offset is known well
		}
		sig := Signal{}
		hv := hostVerdict(resp, nil, ctx.Err(), &sig)
		k.settle(dep, hv)
		k.endProbe()
		return sig, hv
	}
	in := SignalInput{Status: resp.StatusCode, Header: resp.Header}
	if resp.StatusCode >= 400 {
		in.Body = peek(resp, maxPeek)
	}
	if off, ok := k.host.clockOffset(); ok {
		in.Now = time.Now()
		in.ServerNow = in.Now.Add(off)
	}
	sig := t.parser.parse(&in, fam)
	if overloaded(resp.StatusCode, &sig) && t.probe.initial > 0 {
		// An overload without a stated delay: the host is down for now, and
		// its probes, not a cut in the key's pace, say when it is back.
		sig.Throttled = false
	}
	hv := hostVerdict(resp, nil, ctx.Err(), &sig)
	k.settle(dep, hv)
	if !sig.Throttled && !sig.HasWait && !sig.HasRemaining && sig.Limit == 0 {
		k.endProbe()
		return sig, hv
	}
	now := t.now()
	t.observeDate(k, dep, resp, now)
	// A reset stated to the second (a delta in whole seconds, an epoch or a
	// date) is known to a second only, whatever its fraction after the
	// clock offset is taken off.
	coarse := sig.Reset%time.Second == 0 || in.ServerTime().Add(sig.Reset).Nanosecond() == 0
	k.observe(now, dep, route, &sig, coarse)
	return sig, hv
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

// track returns resp, with its body set to give back its request's
// in-flight slot when read to the end or closed.
func (t *Transport) track(k *keyState, resp *http.Response) *http.Response {
	if t.cfg.maxInFlight <= 0 {
		return resp
	}
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

func (t *Transport) newKey(key string, req *http.Request) *keyState {
	lims := t.cfg.limitsFor(req)
	k := &keyState{env: &t.keyEnv, lims: lims, hostName: req.URL.Host}
	k.pacer.init(lims)
	k.host = t.hosts.get(k.hostName)
	k.budget = t.retry.newBudget(t.epoch)
	if t.cfg.breaker != nil {
		s := *t.cfg.breaker
		if t.obs != nil {
			s.OnStateChange = t.obs.breakerHook(key, k.hostName, s.OnStateChange)
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
