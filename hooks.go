package headway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/headway-go/headway/ratelimitheader"
	"go.opentelemetry.io/otel/metric"
)

// Hooks are functions a Transport calls on the few events a program may
// want to act on. Every field is optional. A Transport calls them from the
// goroutine of the request that caused the event (OnBreakerChange: see
// there), after it released every lock of its own, so a hook may use the
// Transport, even for a request on the same key; a hook that blocks holds
// up that request, and only that one.
//
// Keys may hold credentials (KeyByHeader): a hook should not log Key as it
// is.
type Hooks struct {
	// OnThrottle is called for every throttled response (a 429, or a 403 or
	// 503 that a dialect recognises as a limit), before the Transport
	// decides whether to send its request again.
	OnThrottle func(ThrottleEvent)

	// OnPause is called when a throttled response that names a wait pauses
	// its key (or, for a global scope, every key of its credential on its
	// host: of its Authorization header, or X-Api-Key without one).
	OnPause func(PauseEvent)

	// OnRetry is called when the Transport has decided to send a request
	// again, before it waits for the backoff or for its key's pause.
	OnRetry func(RetryEvent)

	// OnBreakerChange is called on every change of a key's breaker state
	// (see WithBreaker), after BreakerSettings.OnStateChange, with the same
	// guarantees: in order, one at a time, never under a lock, possibly
	// from another goroutine than the request that caused it.
	OnBreakerChange func(BreakerEvent)
}

func (h *Hooks) empty() bool {
	return h.OnThrottle == nil && h.OnPause == nil && h.OnRetry == nil && h.OnBreakerChange == nil
}

// ThrottleEvent is a throttled response.
type ThrottleEvent struct {
	Key     string        // the request's key; may hold credentials
	Request *http.Request // the caller's request; it must not be changed
	Attempt int           // the attempt that was throttled, from 1
	Status  int           // the response's status
	Wait    time.Duration // the wait the server named; 0 if none
}

// PauseEvent is a pause of a key, or of every key of a host.
type PauseEvent struct {
	Key     string        // the key whose response paused it; may hold credentials
	Request *http.Request // the caller's request; it must not be changed
	Wait    time.Duration // how long from now nothing of the key leaves
	Global  bool          // the pause holds every key of the request's credential on its host (see WithKey)
	// Stated is the wait the server named when it was above the cap of
	// WithMaxServerWait, and Wait the cap; 0 otherwise.
	Stated time.Duration
}

// RetryEvent is a request about to be sent again.
type RetryEvent struct {
	Key     string        // the request's key; may hold credentials
	Request *http.Request // the caller's request; it must not be changed
	Attempt int           // the attempt to come: 2 for the first retry
	Status  int           // the status of the response retried; 0 after an error
	Err     error         // the transport error retried; nil after a response
	// Delay is the backoff before the request queues again; zero after a
	// throttle, whose retry waits for its key's pause instead.
	Delay time.Duration
}

// BreakerEvent is a change of a key's breaker state.
type BreakerEvent struct {
	Key      string // the key; may hold credentials
	Host     string // the host of the key's first request
	From, To BreakerState
}

// WithHooks sets the functions called on throttles, pauses, retries and
// breaker changes. By default there are none. See Hooks.
func WithHooks(h Hooks) Option {
	return optionFunc(func(c *config) { c.obs.hooks = h })
}

// obsConfig is what the options of metrics.go, log.go and this file set.
type obsConfig struct {
	mp          metric.MeterProvider
	metricKeys  bool
	metricHosts bool
	log         *slog.Logger
	hooks       Hooks
}

// observer tells the Transport's metrics, logger and hooks what happens.
// A Transport without any of them has none (t.obs is nil), and each call
// site checks for it first, so observing costs nothing unless asked for.
// Its methods are called outside every lock.
type observer struct {
	m     *instruments // nil without a MeterProvider
	log   *slog.Logger // nil: no logging
	hooks Hooks
	keys  bool // key attribute on metrics
	hosts bool // host attribute on metrics
}

func newObserver(c obsConfig) *observer {
	if c.mp == nil && c.log == nil && c.hooks.empty() {
		return nil
	}
	o := &observer{log: c.log, hooks: c.hooks, keys: c.metricKeys, hosts: c.metricHosts}
	if c.mp != nil {
		o.m = newInstruments(c.mp, o)
	}
	return o
}

// Why a request failed in headway, unsent: the reason attribute of the
// rejected outcome.
const (
	reasonQueueFull   = "queue_full"
	reasonWaitTooLong = "wait_too_long"
	reasonCircuitOpen = "circuit_open"
	reasonCost        = "cost"
	reasonCanceled    = "canceled"
	reasonOther       = "other"
)

func rejectReason(err error) string {
	var (
		we *WaitError
		ce *CostError
	)
	switch {
	case errors.Is(err, ErrQueueFull):
		return reasonQueueFull
	case errors.As(err, &we): // before the context: it matches DeadlineExceeded
		return reasonWaitTooLong
	case errors.Is(err, ErrCircuitOpen):
		return reasonCircuitOpen
	case errors.As(err, &ce):
		return reasonCost
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return reasonCanceled
	}
	return reasonOther
}

// admitted notes that an attempt got its slot after waiting wait.
func (o *observer) admitted(ctx context.Context, req *http.Request, key string, attempt int, wait time.Duration) {
	if o.m != nil {
		o.m.wait.Record(ctx, wait.Seconds(), o.m.recordOpts(req, key)...)
	}
	if o.debug(ctx) {
		o.log.LogAttrs(ctx, slog.LevelDebug, "headway: admitted",
			append(reqAttrs(req, key), slog.Int("attempt", attempt), slog.Duration("wait", wait))...)
	}
}

// rejected notes that an attempt failed in headway, unsent.
func (o *observer) rejected(ctx context.Context, req *http.Request, key string, attempt int, err error) {
	reason := rejectReason(err)
	if o.m != nil {
		o.m.requests.Add(ctx, 1, o.m.rejectOpts(reason, req, key)...)
	}
	if o.debug(ctx) {
		o.log.LogAttrs(ctx, slog.LevelDebug, "headway: rejected",
			append(reqAttrs(req, key), slog.Int("attempt", attempt), slog.String("reason", reason), errAttr(err))...)
	}
}

// sent notes that an attempt went to the base RoundTripper and came back
// with resp or err.
func (o *observer) sent(ctx context.Context, req *http.Request, key string, err error) {
	if o.m == nil {
		return
	}
	o.m.requests.Add(ctx, 1, o.m.outcomeOpts(reqSent, req, key)...)
	if err != nil {
		o.m.requests.Add(ctx, 1, o.m.outcomeOpts(reqError, req, key)...)
	}
}

// throttled notes a throttled response, and the pause it caused, if any.
func (o *observer) throttled(ctx context.Context, req *http.Request, key string, attempt int, resp *http.Response, sig *ratelimitheader.Signal, limit time.Duration) {
	var wait time.Duration
	if sig.HasWait {
		wait = sig.Wait
	}
	if o.m != nil {
		o.m.requests.Add(ctx, 1, o.m.outcomeOpts(reqThrottled, req, key)...)
	}
	if o.debug(ctx) {
		o.log.LogAttrs(ctx, slog.LevelDebug, "headway: throttled",
			append(reqAttrs(req, key), slog.Int("attempt", attempt), slog.Int("status", resp.StatusCode), slog.Duration("wait", wait))...)
	}
	if h := o.hooks.OnThrottle; h != nil {
		h(ThrottleEvent{Key: key, Request: req, Attempt: attempt, Status: resp.StatusCode, Wait: wait})
	}
	if !sig.HasWait || sig.Wait <= 0 {
		return
	}
	global := sig.Scope == ratelimitheader.ScopeGlobal
	var stated time.Duration
	if wait > limit {
		stated, wait = wait, limit
	}
	if o.m != nil {
		o.m.pauses.Add(ctx, 1, o.m.pauseOpts(global, req, key)...)
	}
	if o.log != nil && o.log.Enabled(ctx, slog.LevelInfo) {
		scope := "key"
		if global {
			scope = "host"
		}
		o.log.LogAttrs(ctx, slog.LevelInfo, "headway: paused",
			append(reqAttrs(req, key), slog.Duration("wait", wait), slog.String("scope", scope))...)
	}
	if h := o.hooks.OnPause; h != nil {
		h(PauseEvent{Key: key, Request: req, Wait: wait, Global: global, Stated: stated})
	}
}

// capped notes a response that named a wait above the cap limit: it holds
// the key for the cap at most.
func (o *observer) capped(ctx context.Context, req *http.Request, key string, status int, wait, limit time.Duration) {
	if o.m != nil {
		o.m.requests.Add(ctx, 1, o.m.outcomeOpts(reqCapped, req, key)...)
	}
	if o.log != nil && o.log.Enabled(ctx, slog.LevelWarn) {
		o.log.LogAttrs(ctx, slog.LevelWarn, "headway: server named a wait above the cap",
			append(reqAttrs(req, key), slog.Duration("wait", wait), slog.Duration("cap", limit),
				slog.Int("status", status))...)
	}
}

// retry notes that a request will be sent again as attempt, after delay.
func (o *observer) retry(ctx context.Context, req *http.Request, key string, attempt int, delay time.Duration, resp *http.Response, err error) {
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	if o.m != nil {
		o.m.requests.Add(ctx, 1, o.m.outcomeOpts(reqRetried, req, key)...)
	}
	if o.debug(ctx) {
		attrs := append(reqAttrs(req, key), slog.Int("attempt", attempt), slog.Duration("delay", delay))
		if err != nil {
			attrs = append(attrs, errAttr(err))
		} else {
			attrs = append(attrs, slog.Int("status", status))
		}
		o.log.LogAttrs(ctx, slog.LevelDebug, "headway: retry", attrs...)
	}
	if h := o.hooks.OnRetry; h != nil {
		h(RetryEvent{Key: key, Request: req, Attempt: attempt, Status: status, Err: err, Delay: delay})
	}
}

// breakerHook returns the OnStateChange of the breaker of key, whose first
// request went to host: it tells the observer, then next, if any.
func (o *observer) breakerHook(key, host string, next func(string, BreakerState, BreakerState)) func(string, BreakerState, BreakerState) {
	return func(k string, from, to BreakerState) {
		if next != nil {
			next(k, from, to)
		}
		ctx := context.Background()
		if o.m != nil {
			o.m.breakerChanges.Add(ctx, 1, o.m.breakerOpts(from, to, host, key)...)
		}
		if o.log != nil && o.log.Enabled(ctx, slog.LevelInfo) {
			o.log.LogAttrs(ctx, slog.LevelInfo, "headway: breaker state changed",
				slog.String("key", keyID(key)), slog.String("host", host),
				slog.String("from", from.String()), slog.String("to", to.String()))
		}
		if h := o.hooks.OnBreakerChange; h != nil {
			h(BreakerEvent{Key: key, Host: host, From: from, To: to})
		}
	}
}
