package sharedquota

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/metric"
)

// WithMeterProvider makes the quota report its Stats as OpenTelemetry
// counters through mp, under the instrumentation scope
// "github.com/headway-go/headway/sharedquota":
//
//	headway.sharedquota.reservations  {reservation}: Reserve calls that returned a wait
//	headway.sharedquota.degraded      {reservation}: of those, decided without Redis by the FailureMode (the fallbacks)
//	headway.sharedquota.leased        {reservation}: of those, served from a lease
//	headway.sharedquota.round_trips   {call}: scripts sent to Redis, heartbeats included
//	headway.sharedquota.errors        {call}: of those, the ones that failed
//
// None carries an attribute. By default there are none. Close stops the
// reports.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}

// WithLogger makes the quota log to l. A state that lasts is logged when
// it begins and when it ends, never once per call or heartbeat: Redis
// unavailable (Info; the FailureMode decides) and back (Info); a key's
// hash that Redis refuses, holding a value of another type (Warn; that key
// alone falls back), and usable again (Info); the set of live processes
// unusable so (Warn; the fallback divides by the last count) and counted
// again (Info). A pause longer than the cap is logged at Warn each time it
// is shortened. Keys are never logged. By default nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) { c.log = l })
}

// registerMetrics starts reporting r's Stats to the MeterProvider, if any.
func (r *Redis) registerMetrics() {
	if r.cfg.mp == nil {
		return
	}
	m := r.cfg.mp.Meter("github.com/headway-go/headway/sharedquota")
	type counter struct {
		name, unit, desc string
		value            func(Stats) int64
	}
	counters := []counter{
		{"headway.sharedquota.reservations", "{reservation}", "Reserve calls that returned a wait.", func(s Stats) int64 { return s.Reservations }},
		{"headway.sharedquota.degraded", "{reservation}", "Reservations decided without Redis, by the FailureMode.", func(s Stats) int64 { return s.Degraded }},
		{"headway.sharedquota.leased", "{reservation}", "Reservations served from a lease.", func(s Stats) int64 { return s.Leased }},
		{"headway.sharedquota.round_trips", "{call}", "Scripts sent to Redis.", func(s Stats) int64 { return s.RoundTrips }},
		{"headway.sharedquota.errors", "{call}", "Scripts sent to Redis that failed.", func(s Stats) int64 { return s.Errors }},
	}
	insts := make([]metric.Int64ObservableCounter, 0, len(counters))
	obs := make([]metric.Observable, 0, len(counters))
	for _, c := range counters {
		in, err := m.Int64ObservableCounter(c.name, metric.WithUnit(c.unit), metric.WithDescription(c.desc))
		if err != nil {
			r.logInfo("headway/sharedquota: metrics off", slog.String("err", err.Error()))
			return
		}
		insts = append(insts, in)
		obs = append(obs, in)
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := r.Stats()
		for i, c := range counters {
			o.ObserveInt64(insts[i], c.value(s))
		}
		return nil
	}, obs...)
	if err == nil {
		r.metricsReg = reg
	}
}

func (r *Redis) logWarn(msg string, attrs ...slog.Attr) {
	if l := r.cfg.log; l != nil {
		l.LogAttrs(context.Background(), slog.LevelWarn, msg, attrs...)
	}
}

func (r *Redis) logInfo(msg string, attrs ...slog.Attr) {
	if l := r.cfg.log; l != nil {
		l.LogAttrs(context.Background(), slog.LevelInfo, msg, attrs...)
	}
}
