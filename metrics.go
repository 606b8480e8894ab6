package headway

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"weak"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// WithMeterProvider makes the Transport report OpenTelemetry metrics
// through mp, under the instrumentation scope
// "github.com/headway-go/headway":
//
//	headway.requests          counter, {request}: attempts by outcome:
//	                          sent (handed to the base RoundTripper),
//	                          throttled, retried, error (no response),
//	                          wait_capped (the response named a wait above
//	                          the cap of WithMaxServerWait), and
//	                          rejected (failed in headway, unsent) with a
//	                          reason: queue_full, wait_too_long,
//	                          circuit_open, cost, canceled or other
//	headway.queue.wait        histogram, s: how long each sent attempt
//	                          waited for its slot (0 for one that left at
//	                          once), in its key's queue and for the shared
//	                          quota
//	headway.pauses            counter, {pause}: throttles that paused a
//	                          key (scope "key") or, for a global scope,
//	                          the keys of a credential on a host (scope
//	                          "host")
//	headway.breaker.changes   counter, {change}: breaker state changes,
//	                          with from and to (see WithBreaker)
//	headway.queue.length      gauge, {request}: requests waiting
//	headway.keys              gauge, {key}: keys held
//	headway.pace              gauge, {request}/s: the rate keys may send
//	                          at, by their limits and what they learned
//	                          from their servers (units per second for
//	                          weighted limits); keys with neither are left
//	                          out
//	headway.learned_limit     gauge, {request}/s: the rate servers allow,
//	                          as learned from their headers or throttles;
//	                          keys that learned nothing are left out
//	headway.breakers          gauge, {key}: keys by breaker state (state)
//
// Attributes are bounded enums only (outcome, reason, scope, from, to,
// state): the gauges sum over every key. Keys and hosts are unbounded
// (KeyByHeader, KeyByHost over URLs users choose), so a key attribute
// comes only with WithMetricKeys and a host attribute only with
// WithMetricHosts; then the gauges sum over the keys that share them.
//
// By default (or with a nil mp) no metric is kept, at no cost. The gauges
// are read when mp collects, from every key at once; the Transport stops
// reporting them when it is garbage collected.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.obs.mp = mp })
}

// WithMetricKeys adds, when on, the attribute headway.key to every metric
// of WithMeterProvider but headway.breaker.changes' and headway.keys': a
// short hash of the key (the first 12 hex digits of its SHA-256, as
// WithLogger logs it), never the key itself, which may hold credentials.
// Each key then makes series of its own: turn it on only when keys are
// few and bounded. Off by default.
func WithMetricKeys(on bool) Option {
	return optionFunc(func(c *config) { c.obs.metricKeys = on })
}

// WithMetricHosts adds, when on, the attribute server.address to every
// metric of WithMeterProvider: the host of the request (for the gauges,
// of its key's first request). Hosts are unbounded when URLs come from
// users: turn it on only when they are few. Off by default.
func WithMetricHosts(on bool) Option {
	return optionFunc(func(c *config) { c.obs.metricHosts = on })
}

// meterName is the instrumentation scope of headway's metrics.
const meterName = "github.com/headway-go/headway"

// Attribute keys.
const (
	attrOutcome = attribute.Key("outcome")
	attrReason  = attribute.Key("reason")
	attrScope   = attribute.Key("scope")
	attrFrom    = attribute.Key("from")
	attrTo      = attribute.Key("to")
	attrState   = attribute.Key("state")
	attrKey     = attribute.Key("headway.key")
	attrHost    = attribute.Key("server.address")
)

// reqOutcome is the outcome attribute of headway.requests.
type reqOutcome uint8

const (
	reqSent reqOutcome = iota
	reqThrottled
	reqRetried
	reqError
	reqRejected
	reqCapped
	numReqOutcomes
)

var outcomeNames = [numReqOutcomes]string{"sent", "throttled", "retried", "error", "rejected", "wait_capped"}

var rejectReasons = []string{reasonQueueFull, reasonWaitTooLong, reasonCircuitOpen, reasonCost, reasonCanceled, reasonOther}

// instruments are the metrics of one Transport. Without key and host
// attributes, every measurement takes options built once, and allocates
// nothing of its own.
type instruments struct {
	keys, hosts bool

	wait           metric.Float64Histogram
	requests       metric.Int64Counter
	pauses         metric.Int64Counter
	breakerChanges metric.Int64Counter

	queueLen, numKeys, breakers metric.Int64ObservableGauge
	pace, learned               metric.Float64ObservableGauge

	outcomes [numReqOutcomes][]metric.AddOption
	rejects  map[string][]metric.AddOption
	scopes   [2][]metric.AddOption // key, host
}

func newInstruments(mp metric.MeterProvider, o *observer) *instruments {
	m := mp.Meter(meterName)
	in := &instruments{keys: o.keys, hosts: o.hosts}
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	in.wait, err = m.Float64Histogram("headway.queue.wait", metric.WithUnit("s"),
		metric.WithDescription("Time each sent attempt waited for its slot."),
		metric.WithExplicitBucketBoundaries(0, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600))
	check(err)
	in.requests, err = m.Int64Counter("headway.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Attempts by outcome: sent, throttled, retried, error, rejected (with a reason)."))
	check(err)
	in.pauses, err = m.Int64Counter("headway.pauses", metric.WithUnit("{pause}"),
		metric.WithDescription("Throttles that paused a key or a host."))
	check(err)
	in.breakerChanges, err = m.Int64Counter("headway.breaker.changes", metric.WithUnit("{change}"),
		metric.WithDescription("Circuit breaker state changes."))
	check(err)
	in.queueLen, err = m.Int64ObservableGauge("headway.queue.length", metric.WithUnit("{request}"),
		metric.WithDescription("Requests waiting in the queues."))
	check(err)
	in.numKeys, err = m.Int64ObservableGauge("headway.keys", metric.WithUnit("{key}"),
		metric.WithDescription("Keys held."))
	check(err)
	in.breakers, err = m.Int64ObservableGauge("headway.breakers", metric.WithUnit("{key}"),
		metric.WithDescription("Keys by circuit breaker state."))
	check(err)
	in.pace, err = m.Float64ObservableGauge("headway.pace", metric.WithUnit("{request}/s"),
		metric.WithDescription("The rate keys may send at, by their limits and what they learned."))
	check(err)
	in.learned, err = m.Float64ObservableGauge("headway.learned_limit", metric.WithUnit("{request}/s"),
		metric.WithDescription("The rate servers allow, as learned from their responses."))
	check(err)
	if len(errs) > 0 {
		// Only a broken MeterProvider gets here: measure nothing rather
		// than fail the Transport.
		if o.log != nil {
			o.log.Warn("headway: metrics off", "err", errors.Join(errs...))
		}
		return newInstruments(noop.NewMeterProvider(), o)
	}

	for i := range in.outcomes {
		in.outcomes[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrOutcome.String(outcomeNames[i])))}
	}
	in.rejects = make(map[string][]metric.AddOption, len(rejectReasons))
	for _, r := range rejectReasons {
		in.rejects[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
			attrOutcome.String(outcomeNames[reqRejected]), attrReason.String(r)))}
	}
	in.scopes[0] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrScope.String("key")))}
	in.scopes[1] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrScope.String("host")))}
	return in
}

// register starts reporting the gauges of t. The callback holds t weakly,
// and is unregistered when t is collected, so a MeterProvider does not
// keep Transports alive.
func (in *instruments) register(t *Transport) {
	if _, ok := in.queueLen.(noop.Int64ObservableGauge); ok {
		return
	}
	wt := weak.Make(t)
	reg, err := t.cfg.obs.mp.Meter(meterName).RegisterCallback(func(ctx context.Context, obs metric.Observer) error {
		if t := wt.Value(); t != nil {
			in.collect(t, obs)
		}
		return nil
	}, in.queueLen, in.numKeys, in.breakers, in.pace, in.learned)
	if err != nil {
		return
	}
	runtime.AddCleanup(t, func(r metric.Registration) { _ = r.Unregister() }, reg)
}

// scoped returns the attributes key and host add to a measurement of a
// request, as options appended to base; base itself without them.
func (in *instruments) scoped(base []metric.AddOption, req *http.Request, key string) []metric.AddOption {
	if !in.keys && !in.hosts {
		return base
	}
	return append(append([]metric.AddOption(nil), base...), metric.WithAttributes(in.reqAttrs(req, key)...))
}

func (in *instruments) reqAttrs(req *http.Request, key string) []attribute.KeyValue {
	var kv []attribute.KeyValue
	if in.keys {
		kv = append(kv, attrKey.String(keyID(key)))
	}
	if in.hosts && req.URL != nil {
		kv = append(kv, attrHost.String(req.URL.Host))
	}
	return kv
}

func (in *instruments) outcomeOpts(o reqOutcome, req *http.Request, key string) []metric.AddOption {
	return in.scoped(in.outcomes[o], req, key)
}

func (in *instruments) rejectOpts(reason string, req *http.Request, key string) []metric.AddOption {
	return in.scoped(in.rejects[reason], req, key)
}

func (in *instruments) pauseOpts(global bool, req *http.Request, key string) []metric.AddOption {
	i := 0
	if global {
		i = 1
	}
	return in.scoped(in.scopes[i], req, key)
}

func (in *instruments) recordOpts(req *http.Request, key string) []metric.RecordOption {
	if !in.keys && !in.hosts {
		return nil
	}
	return []metric.RecordOption{metric.WithAttributes(in.reqAttrs(req, key)...)}
}

func (in *instruments) breakerOpts(from, to BreakerState, host, key string) []metric.AddOption {
	kv := []attribute.KeyValue{attrFrom.String(from.String()), attrTo.String(to.String())}
	if in.hosts {
		kv = append(kv, attrHost.String(host))
	}
	return []metric.AddOption{metric.WithAttributes(kv...)}
}

// gaugeSums are the gauges of the keys that share one attribute set.
type gaugeSums struct {
	set               attribute.Set
	keys, queued      int64
	pace, learned     float64
	paced, learnedAny bool
	breakers          [3]int64 // by BreakerState
	hasBreaker        bool
}

// collect reports the gauges of t: it reads every key, under its lock, one
// at a time.
func (in *instruments) collect(t *Transport, obs metric.Observer) {
	now := t.now()
	sums := map[attribute.Distinct]*gaugeSums{}
	var order []*gaugeSums
	get := func(set attribute.Set) *gaugeSums {
		g := sums[set.Equivalent()]
		if g == nil {
			g = &gaugeSums{set: set}
			sums[set.Equivalent()] = g
			order = append(order, g)
		}
		return g
	}
	if !in.keys && !in.hosts {
		get(*attribute.EmptySet()) // zeros when no key is held
	}
	for i := range t.keys.shards {
		s := &t.keys.shards[i]
		s.mu.RLock()
		for key, k := range s.m {
			var kv []attribute.KeyValue
			if in.keys {
				kv = append(kv, attrKey.String(keyID(key)))
			}
			if in.hosts {
				kv = append(kv, attrHost.String(k.host.name))
			}
			g := get(attribute.NewSet(kv...))
			k.mu.Lock()
			g.keys++
			g.queued += k.queue.n
			pace, learned := k.rates(now)
			k.mu.Unlock()
			if pace > 0 {
				g.pace += pace
				g.paced = true
			}
			if learned > 0 {
				g.learned += learned
				g.learnedAny = true
			}
			if k.br != nil {
				g.breakers[k.br.lastState.Load()]++
				g.hasBreaker = true
			}
		}
		s.mu.RUnlock()
	}
	for _, g := range order {
		opt := metric.WithAttributeSet(g.set)
		obs.ObserveInt64(in.queueLen, g.queued, opt)
		if !in.keys {
			obs.ObserveInt64(in.numKeys, g.keys, opt)
		}
		if g.paced {
			obs.ObserveFloat64(in.pace, g.pace, opt)
		}
		if g.learnedAny {
			obs.ObserveFloat64(in.learned, g.learned, opt)
		}
		if g.hasBreaker {
			for st, n := range g.breakers {
				kv := append(g.set.ToSlice(), attrState.String(BreakerState(st).String()))
				obs.ObserveInt64(in.breakers, n, metric.WithAttributes(kv...))
			}
		}
	}
}

// rates returns, under k.mu, the rate k may send at, at now, in requests
// (units, for a weighted limit) per second: the slowest of its limits, the
// refill rate its server stated or was measured at, and the rate learned
// from bare throttles; and learned, the rate the server allows as far as k
// learned it: its stated or measured refill, else the rate at the last
// throttle. Each is 0 when nothing says.
func (k *keyState) rates(now int64) (pace, learned float64) {
	slower := func(a, b float64) float64 {
		if a == 0 || b < a {
			return b
		}
		return a
	}
	pace = k.ceiling()
	if r := k.model.rate * 1e9; r > 0 {
		learned = r
		if k.model.known {
			pace = slower(pace, r)
		}
	}
	if k.aimd.active && !k.aimd.idle(now) {
		pace = slower(pace, k.aimd.at(now))
		if learned == 0 {
			learned = k.aimd.wmax
		}
	}
	return pace, learned
}
