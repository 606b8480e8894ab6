package headway

import (
	"context"
	"hash/maphash"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
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
	base   http.RoundTripper
	cfg    config
	parser SignalParser
	keys   keyTable
	hosts  hostTable
	epoch  time.Time
	stats  struct{ throttled, retries atomic.Int64 }
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
		cfg.queue.MaxLen = DefaultQueueLen
	}
	for _, l := range cfg.limits {
		mustValid(l)
	}
	for _, ls := range cfg.hostLimits {
		for _, l := range ls {
			mustValid(l)
		}
	}
	t := &Transport{base: base, cfg: cfg, epoch: time.Now()}
	t.parser = SignalParser{Dialects: cfg.dialects, MaxWait: cfg.maxRetryAfter}
	t.keys.seed = maphash.MakeSeed()
	return t
}

func mustValid(l Limit) {
	if err := l.validate(); err != nil {
		panic(err)
	}
}

// now returns the time on the pacer's clock: nanoseconds since t was made,
// on the monotonic clock.
func (t *Transport) now() int64 { return int64(time.Since(t.epoch)) }

// clock returns the wall clock, to compare with context deadlines.
func (t *Transport) clock() time.Time { return time.Now() }

// RoundTrip waits until req's key may send it, then sends it through the
// base RoundTripper, reads what the response says about the key's rate
// limit and adapts the key's pace to it.
//
// A throttled response (429, or a 403 or 503 that a dialect recognises as
// a limit) pauses the whole key for the wait it names. If req can be sent
// again (it has no body, or GetBody), its wait fits MaxRetryAfter and the
// context's deadline, and attempts are left, RoundTrip sends it again
// ahead of the key's other waiting requests once the pause is over;
// otherwise the throttled response goes back to the caller at once, as a
// response, not an error.
//
// RoundTrip fails without sending req when the key's queue is full
// (ErrQueueFull), when req's cost cannot fit a limit (*CostError), when the
// wait needed is longer than req's context deadline or MaxWait allow
// (*WaitError), or when req's context ends while it waits.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	cost := t.cfg.costOf(req)
	if cost < 0 {
		closeBody(req)
		return nil, &CostError{Cost: int(cost)}
	}
	key := t.cfg.keyFunc(req)
	ctx := req.Context()
	out := req              // what this attempt sends
	var last *http.Response // the last throttled response, when retrying
	for attempt := 1; ; attempt++ {
		k, dep, err := t.acquire(ctx, key, req, cost, attempt > 1)
		if err != nil {
			if attempt == 1 {
				closeBody(req)
				return nil, err
			}
			if ctx.Err() != nil {
				last.Body.Close()
				return nil, err
			}
			return last, nil // no retry in time: the throttled response is the answer
		}
		if attempt > 1 {
			if out, err = retryRequest(req); err != nil {
				k.release()
				return last, nil
			}
			last.Body.Close()
		}
		resp, err := t.base.RoundTrip(out)
		if err != nil {
			k.endProbe()
			k.release()
			return nil, err
		}
		sig := t.observe(k, dep, resp)
		if sig.Throttled {
			t.stats.throttled.Add(1)
			if t.retryThrottled(ctx, req, resp, attempt, &sig) {
				if last = buffer(resp, maxBufferedThrottle); last != nil {
					t.stats.retries.Add(1)
					k.release()
					continue
				}
			}
		}
		return t.track(k, resp), nil
	}
}

// acquire finds the key's state and waits there for a slot.
func (t *Transport) acquire(ctx context.Context, key string, req *http.Request, cost int64, front bool) (*keyState, departure, error) {
	for {
		k := t.keys.get(key, t, req)
		dep, err := k.acquire(ctx, cost, front)
		if err != errEvicted {
			return k, dep, err
		}
	}
}

// observe reads what resp, the response to departure dep of k, says about
// its key's rate limit, and tells the key. A response that says nothing
// costs no lock and no clock reading.
func (t *Transport) observe(k *keyState, dep departure, resp *http.Response) Signal {
	in := SignalInput{Status: resp.StatusCode, Header: resp.Header}
	if resp.StatusCode >= 400 {
		in.Body = peek(resp, maxPeek)
	}
	if off, ok := k.host.clockOffset(); ok {
		in.Now = time.Now()
		in.ServerNow = in.Now.Add(off)
	}
	sig := t.parser.Parse(&in)
	if !sig.Throttled && !sig.HasWait && !sig.HasRemaining && sig.Limit == 0 {
		k.endProbe()
		return sig
	}
	now := t.now()
	if v := resp.Header["Date"]; len(v) > 0 {
		if date, err := http.ParseTime(v[0]); err == nil {
			k.host.observeDate(date, t.wall(dep.at), t.wall(now))
		}
	}
	k.observe(now, dep.seq, &sig)
	return sig
}

// wall converts a time on the pacer's clock to the wall clock.
func (t *Transport) wall(ns int64) time.Time { return t.epoch.Add(time.Duration(ns)) }

// retryThrottled decides whether the throttled response resp to req, on
// the given attempt, is retried after its key's pause.
func (t *Transport) retryThrottled(ctx context.Context, req *http.Request, resp *http.Response, attempt int, sig *Signal) bool {
	if !sig.Retryable || sig.TooLong || attempt >= t.cfg.throttleAttempts || !replayable(req) {
		return false
	}
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusForbidden && !idempotent(req) {
		return false // a 503 may have been processed: only 429 and 403 limits were not
	}
	if dl, ok := ctx.Deadline(); ok && sig.HasWait && time.Now().Add(sig.Wait).After(dl) {
		return false
	}
	return true
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

func (t *Transport) newKey(req *http.Request) *keyState {
	lims := t.cfg.limitsFor(req)
	k := &keyState{t: t, lims: lims, pacer: newPacer(lims), hostName: req.URL.Host}
	k.host = t.hosts.get(k.hostName)
	k.probing.Store(len(lims) == 0)
	k.model.spread = t.cfg.spread
	return k
}

// Stats returns counts of what t has done since it was made.
func (t *Transport) Stats() Stats {
	return Stats{Throttled: t.stats.throttled.Load(), Retries: t.stats.retries.Load()}
}

// Stats counts what a Transport did.
type Stats struct {
	// Throttled is the number of throttled responses received.
	Throttled int64
	// Retries is the number of requests sent again after a throttle.
	Retries int64
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
