// Package metrictest is an in-memory OpenTelemetry MeterProvider for tests.
//
// It records what the instruments headway and sharedquota use receive
// (counters, histograms, observable gauges and counters), so their tests
// read metrics without the OpenTelemetry SDK in any library module's
// requirements. It aggregates the way the SDK's cumulative ManualReader
// does for these instruments: counters and histograms add up, observable
// instruments hold what their callbacks observed in the last Collect.
package metrictest

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"
	"go.opentelemetry.io/otel/metric/noop"
)

// Kind is how an instrument's points aggregate.
type Kind int

const (
	Sum       Kind = iota + 1 // counters, synchronous or observable
	Gauge                     // observable gauges
	Histogram                 // histograms: Count and Value (the sum)
)

// A Point is one attribute set's aggregate.
type Point struct {
	Attributes attribute.Set
	Value      float64 // the sum, the last observation, or the histogram's sum
	Count      uint64  // histograms only: how many values were recorded
}

// A Metric is one instrument's points at a Collect.
type Metric struct {
	Name   string
	Scope  string // the name given to Meter
	Kind   Kind
	Points []Point
}

// Provider is a metric.MeterProvider that keeps every point in memory. It
// is safe for concurrent use.
type Provider struct {
	noop.MeterProvider

	mu    sync.Mutex
	insts map[string]*inst // by name
	order []string
	cbs   map[*registration]struct{}
}

// NewProvider returns an empty Provider.
func NewProvider() *Provider {
	return &Provider{insts: map[string]*inst{}, cbs: map[*registration]struct{}{}}
}

// Meter returns a Meter whose instruments record into p.
func (p *Provider) Meter(name string, _ ...metric.MeterOption) metric.Meter {
	return &meter{p: p, scope: name}
}

// Collect runs the registered callbacks and returns every instrument's
// points, in the order the instruments were created.
func (p *Provider) Collect(ctx context.Context) []Metric {
	p.mu.Lock()
	cbs := make([]*registration, 0, len(p.cbs))
	for r := range p.cbs {
		cbs = append(cbs, r)
	}
	for _, in := range p.insts {
		if in.observable {
			in.points = map[attribute.Distinct]*Point{}
		}
	}
	p.mu.Unlock()
	for _, r := range cbs { // outside the lock: a callback records through p
		_ = r.f(ctx, observer{p: p})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Metric, 0, len(p.order))
	for _, name := range p.order {
		in := p.insts[name]
		m := Metric{Name: name, Scope: in.scope, Kind: in.kind}
		for _, pt := range in.points {
			m.Points = append(m.Points, *pt)
		}
		out = append(out, m)
	}
	return out
}

// inst is one instrument's state, under Provider.mu.
type inst struct {
	scope      string
	kind       Kind
	observable bool
	points     map[attribute.Distinct]*Point
}

// instrument returns the instrument name, creating it on first use.
func (p *Provider) instrument(scope, name string, kind Kind, observable bool) *inst {
	p.mu.Lock()
	defer p.mu.Unlock()
	in, ok := p.insts[name]
	if !ok {
		in = &inst{scope: scope, kind: kind, observable: observable, points: map[attribute.Distinct]*Point{}}
		p.insts[name] = in
		p.order = append(p.order, name)
	}
	return in
}

// record adds v to (or, for a gauge, sets v as) in's point for set.
func (p *Provider) record(in *inst, set attribute.Set, v float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pt, ok := in.points[set.Equivalent()]
	if !ok {
		pt = &Point{Attributes: set}
		in.points[set.Equivalent()] = pt
	}
	switch {
	case in.observable: // the callback observes the current value
		pt.Value = v
	case in.kind == Histogram:
		pt.Value += v
		pt.Count++
	default:
		pt.Value += v
	}
}

type meter struct {
	noop.Meter
	p     *Provider
	scope string
}

func (m *meter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return int64Counter{p: m.p, in: m.p.instrument(m.scope, name, Sum, false)}, nil
}

func (m *meter) Float64Histogram(name string, _ ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return float64Histogram{p: m.p, in: m.p.instrument(m.scope, name, Histogram, false)}, nil
}

func (m *meter) Int64ObservableGauge(name string, _ ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	return &int64Observable{in: m.p.instrument(m.scope, name, Gauge, true)}, nil
}

func (m *meter) Int64ObservableCounter(name string, _ ...metric.Int64ObservableCounterOption) (metric.Int64ObservableCounter, error) {
	// An observable counter observes its running total.
	return &int64Observable{in: m.p.instrument(m.scope, name, Sum, true)}, nil
}

func (m *meter) Float64ObservableGauge(name string, _ ...metric.Float64ObservableGaugeOption) (metric.Float64ObservableGauge, error) {
	return &float64Observable{in: m.p.instrument(m.scope, name, Gauge, true)}, nil
}

func (m *meter) RegisterCallback(f metric.Callback, _ ...metric.Observable) (metric.Registration, error) {
	r := &registration{p: m.p, f: f}
	m.p.mu.Lock()
	m.p.cbs[r] = struct{}{}
	m.p.mu.Unlock()
	return r, nil
}

type registration struct {
	embedded.Registration
	p *Provider
	f metric.Callback
}

func (r *registration) Unregister() error {
	r.p.mu.Lock()
	delete(r.p.cbs, r)
	r.p.mu.Unlock()
	return nil
}

type int64Counter struct {
	noop.Int64Counter
	p  *Provider
	in *inst
}

func (c int64Counter) Add(_ context.Context, v int64, opts ...metric.AddOption) {
	c.p.record(c.in, metric.NewAddConfig(opts).Attributes(), float64(v))
}

type float64Histogram struct {
	noop.Float64Histogram
	p  *Provider
	in *inst
}

func (h float64Histogram) Record(_ context.Context, v float64, opts ...metric.RecordOption) {
	h.p.record(h.in, metric.NewRecordConfig(opts).Attributes(), v)
}

// int64Observable is an Int64ObservableGauge and an Int64ObservableCounter.
type int64Observable struct {
	noop.Int64ObservableGauge
	embedded.Int64ObservableCounter
	in *inst
}

type float64Observable struct {
	noop.Float64ObservableGauge
	in *inst
}

type observer struct {
	noop.Observer
	p *Provider
}

func (o observer) ObserveInt64(obs metric.Int64Observable, v int64, opts ...metric.ObserveOption) {
	if in, ok := obs.(*int64Observable); ok {
		o.p.record(in.in, metric.NewObserveConfig(opts).Attributes(), float64(v))
	}
}

func (o observer) ObserveFloat64(obs metric.Float64Observable, v float64, opts ...metric.ObserveOption) {
	if in, ok := obs.(*float64Observable); ok {
		o.p.record(in.in, metric.NewObserveConfig(opts).Attributes(), v)
	}
}
