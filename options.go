package headway

import (
	"context"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/headway-go/headway/ratelimitheader"
)

// An Option configures a Transport. Options are applied in order; a later
// one overrides an earlier one of the same kind.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	limits      []Limit            // for keys whose host has no limits of its own
	hostLimits  map[string][]Limit // by host, lower case, with or without port
	routeLimits []routeLimit       // by host and path prefix, before hostLimits; the last match wins
	keyFunc     KeyFunc
	costFunc    func(*http.Request) int
	maxInFlight int
	queue       QueueOptions

	dialects      []ratelimitheader.Dialect
	maxRetryAfter time.Duration
	spread        bool
	retry         RetryOptions
	breaker       *BreakerSettings
	shared        SharedQuota

	obs obsConfig // metrics, logging and hooks; see metrics.go, log.go, hooks.go
}

func defaultConfig() config {
	return config{keyFunc: KeyByHost, maxRetryAfter: defaultMaxWait}
}

// WithRetry sets how failed and throttled requests are sent again. By
// default (the zero RetryOptions) a request is sent up to 4 times: a
// throttled one when its key's pause ends, ahead of new work; a 502, 503 or
// 504 or a transport error, for an idempotent request, after a jittered
// exponential backoff; within a budget of 20% of the key's recent requests.
// MaxAttempts 1 turns retries off. See RetryOptions.
func WithRetry(o RetryOptions) Option {
	return optionFunc(func(c *config) { c.retry = o })
}

// WithBreaker gives every key a circuit breaker: when a key's server keeps
// failing (5xx but 501 and 505, transport errors), its requests fail at
// once with a *CircuitOpenError, queued ones included, until a probe gets
// through. By default there is none. See BreakerSettings.
func WithBreaker(s BreakerSettings) Option {
	return optionFunc(func(c *config) { c.breaker = &s })
}

// WithMaxServerWait caps the waits a server names (Retry-After, or the
// reset of an exhausted quota). A throttled response that names a longer
// wait goes back to the caller at once, unretried. Such a wait holds its
// key for the cap at most, is logged at Warn and counted (the outcome
// "wait_capped" of headway.requests; PauseEvent.Stated for a pause), and
// while what is left of it is longer than the cap, a request on the key
// fails at once, unsent, with a *WaitError whose Stated is true and whose
// Wait is what is left; then the key waits out the rest. The default is
// 10 minutes; a zero or negative d keeps the default.
func WithMaxServerWait(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.maxRetryAfter = d
		}
	})
}

// WithDialects sets the rate-limit dialects read from responses, in place
// of [ratelimitheader.DefaultDialects]; append to it to add a vendor.
// Retry-After is always read. Nil dialects are left out: WithDialects(nil)
// reads no dialect at all.
func WithDialects(d ...ratelimitheader.Dialect) Option {
	d = slices.DeleteFunc(append([]ratelimitheader.Dialect{}, d...), func(d ratelimitheader.Dialect) bool { return d == nil })
	return optionFunc(func(c *config) { c.dialects = d })
}

// WithSpread makes a key spread the quota a server says is left evenly
// until it comes back, rather than spend it at once: for services that
// keep headroom for later traffic, or that punish bursts. By default
// remaining quota is spent as fast as the key's limits allow.
func WithSpread() Option {
	return optionFunc(func(c *config) { c.spread = true })
}

// WithLimit sets the limits of every key whose host has none of its own
// (see WithHostLimit). A request spends its cost on all of them together,
// or waits until it can: GitHub's 5,000 requests an hour beside a
// per-minute secondary limit, say, or an API's requests per minute beside
// its tokens per minute.
//
// A limit is what a provider's documentation says, and a server may allow
// a smaller burst than it: until a key's first answer comes (a second at
// most), the key sends one request and holds the others, with limits or
// without; then what the server says is left caps the limits.
//
// A limit whose Burst is its Count (a quota per Period, as providers
// publish them) is paced as a bucket until the server proves that it counts
// fixed windows of that Period (stated resets that stay put while the quota
// drains, then the whole quota back at once; or throttles whose waits end
// a window apart). From then on it is counted in the server's windows: up
// to Count units in each, from its boundary, as the server's clock places
// it. It still never lets more than Count into one of the server's
// windows, but across a boundary up to twice Count may leave within a
// short span, which the server allows and a bucket would not.
//
// By default no limit is set: requests leave as fast as they come, and
// only QueueOptions and WithMaxInFlight apply. New panics if a limit is
// invalid (see Limit).
func WithLimit(limits ...Limit) Option {
	limits = append([]Limit(nil), limits...)
	return optionFunc(func(c *config) { c.limits = limits })
}

// WithHostLimit sets the limits of every key whose request goes to host,
// in place of those of WithLimit. The host is matched without regard to
// case, either with its port ("api.example.com:8443") or without it
// ("api.example.com"), the former first. Limits are chosen when a key is
// first seen, from that request's host.
func WithHostLimit(host string, limits ...Limit) Option {
	limits = append([]Limit(nil), limits...)
	host = strings.ToLower(host)
	return optionFunc(func(c *config) {
		if c.hostLimits == nil {
			c.hostLimits = make(map[string][]Limit)
		}
		c.hostLimits[host] = limits
	})
}

// WithKey sets how requests are grouped: every request with the same key
// shares one pacer, one queue and one in-flight bound, and keys never
// delay one another. The default is KeyByHost.
func WithKey(f KeyFunc) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.keyFunc = f
		}
	})
}

// WithMaxInFlight bounds the requests of one key that are sent and not yet
// finished, from the moment they leave until their response body is read
// to the end or closed (or RoundTrip fails). The rest wait in the queue.
// Zero, the default, or a negative n means no bound.
func WithMaxInFlight(n int) Option {
	return optionFunc(func(c *config) { c.maxInFlight = min(max(n, 0), math.MaxInt32) })
}

// WithQueue bounds the per-key queue of waiting requests. See QueueOptions
// for the defaults.
func WithQueue(q QueueOptions) Option {
	return optionFunc(func(c *config) { c.queue = q })
}

// WithCostFunc sets the cost of requests whose context carries none (see
// WithCost): f returns the units a request spends on each weighted limit of
// its key. Without it such a request costs 1.
func WithCostFunc(f func(*http.Request) int) Option {
	return optionFunc(func(c *config) { c.costFunc = f })
}

type costKey struct{}

// WithCost returns a copy of ctx that makes a request sent with it cost n
// units of each weighted limit of its key, in place of 1: the tokens an
// API call will use, or the points of a GraphQL query. A cost of 0 spends
// nothing but still waits its turn; a negative cost fails the request with
// ErrInvalidCost; a cost above a limit's burst fails it with
// ErrCostTooLarge.
func WithCost(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, costKey{}, n)
}

// costOf returns the cost of req: from its context, else from the cost
// func, else 1.
func (c *config) costOf(ctx context.Context, req *http.Request) int64 {
	if n, ok := ctx.Value(costKey{}).(int); ok {
		return int64(n)
	}
	if c.costFunc != nil {
		return int64(c.costFunc(req))
	}
	return 1
}

// routeLimit is the limits of the requests to host (or, for "*.example.com",
// to its subdomains) whose path begins with prefix (see Preset.PathPrefix)
// and, if match is set, that match reports true for.
type routeLimit struct {
	host, prefix string
	match        func(*http.Request) bool
	limits       []Limit
}

// matches reports whether req is one of r's requests.
func (r *routeLimit) matches(req *http.Request) bool {
	return matchHost(req, r.host) && strings.HasPrefix(req.URL.Path, r.prefix) && (r.match == nil || r.match(req))
}

// limitsFor returns the limits of a new key whose first request is req:
// a route's of its host, else the host's, else a route's of a host
// pattern ("*.example.com"), else the Transport's.
func (c *config) limitsFor(req *http.Request) []Limit {
	if req.URL == nil {
		return c.limits
	}
	if l, ok := c.routeFor(req, false); ok {
		return l
	}
	if len(c.hostLimits) > 0 {
		host := strings.ToLower(req.URL.Host)
		if l, ok := c.hostLimits[host]; ok {
			return l
		}
		if l, ok := c.hostLimits[strings.ToLower(req.URL.Hostname())]; ok {
			return l
		}
	}
	if l, ok := c.routeFor(req, true); ok {
		return l
	}
	return c.limits
}

// routeFor returns the limits of the last route that matches req, among
// those of host patterns if wild, else among those of hosts.
func (c *config) routeFor(req *http.Request, wild bool) ([]Limit, bool) {
	for i := len(c.routeLimits) - 1; i >= 0; i-- {
		if r := &c.routeLimits[i]; strings.HasPrefix(r.host, "*.") == wild && r.matches(req) {
			return r.limits, true
		}
	}
	return nil, false
}

// defaultMaxWait is WithMaxServerWait's default, as it is
// ratelimitheader.Parser.MaxServerWait's.
const defaultMaxWait = 10 * time.Minute
