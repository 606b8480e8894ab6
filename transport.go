package headway

import (
	"hash/maphash"
	"io"
	"net/http"
	"sync"
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
	base  http.RoundTripper
	cfg   config
	keys  keyTable
	epoch time.Time
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
// base RoundTripper. It fails without sending req when the key's queue is
// full (ErrQueueFull), when req's cost cannot fit a limit (*CostError),
// when the wait needed is longer than req's context deadline or MaxWait
// allow (*WaitError), or when req's context ends while it waits.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	cost := t.cfg.costOf(req)
	if cost < 0 {
		closeBody(req)
		return nil, &CostError{Cost: int(cost)}
	}
	key := t.cfg.keyFunc(req)
	var k *keyState
	for {
		k = t.keys.get(key, t, req)
		err := k.acquire(req.Context(), cost)
		if err == nil {
			break
		}
		if err != errEvicted {
			closeBody(req)
			return nil, err
		}
	}
	resp, err := t.base.RoundTrip(req)
	if t.cfg.maxInFlight <= 0 {
		return resp, err
	}
	if err != nil || resp == nil || resp.Body == nil {
		k.release()
		return resp, err
	}
	if _, ok := resp.Body.(io.Writer); ok {
		// A switched protocol (101) body is a connection, not a response to
		// read to the end: it no longer counts as in flight.
		k.release()
		return resp, nil
	}
	resp.Body = &releaseBody{ReadCloser: resp.Body, k: k}
	return resp, nil
}

func (t *Transport) newKey(req *http.Request) *keyState {
	lims := t.cfg.limitsFor(req)
	return &keyState{t: t, lims: lims, pacer: newPacer(lims)}
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
