package fakeserver

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// Algorithm selects how a Server decides which requests to admit.
type Algorithm int

const (
	// TokenBucket holds Burst tokens and gains Limit tokens per Window; a
	// request spends one token or is rejected. It starts full.
	TokenBucket Algorithm = iota

	// LeakyBucket is a leaky bucket used as a meter, without a queue: the
	// generic cell rate algorithm (GCRA). Each admitted request pours one unit
	// into a bucket of capacity Burst that leaks Limit units per Window; a
	// request that would overflow it is rejected. It admits exactly the same
	// requests as TokenBucket with the same settings (the two are duals); it
	// exists so that the bucket's bookkeeping (a theoretical arrival time)
	// and its level, as Shopify reports it, are modelled directly.
	LeakyBucket

	// FixedWindow admits Limit requests in each window [k·Window,
	// (k+1)·Window) of Unix time on the server's clock (ClockSkew and
	// ClockDrift included, as a real server counts on its own clock), so
	// windows of a second start on the server's whole seconds. A client
	// can get 2·Limit requests through in one Window across a boundary.
	FixedWindow

	// SlidingWindow admits a request at t if fewer than Limit requests were
	// admitted in (t-Window, t]. It is an exact sliding log, not the usual
	// two-counter approximation: it keeps the times of the last Limit
	// admitted requests of each key (8 bytes each).
	SlidingWindow

	// SlidingWindowCounter is the usual approximation of a sliding window
	// (Cloudflare's, and that of many limiters over Redis): it counts the
	// admitted requests of each fixed window of the server's clock, as
	// FixedWindow does, and admits a request at a fraction f of the
	// current window if prev·(1-f) + curr < Limit, where prev and curr are
	// the counts of the previous window and of this one so far. It admits
	// Limit at once on a rested key, then about Limit per Window, spread
	// over each window as the previous one's weight fades; exact to the
	// nanosecond (in integers). Remaining is the number of requests the
	// inequality admits right now.
	SlidingWindowCounter

	// AnchoredWindow admits Limit requests per window, each window of a
	// key beginning at the first request that arrives after the last one
	// ended, not on the clock: a Redis INCR with an EXPIRE set at the
	// first (many Express and API-gateway limiters), GitHub's hourly
	// window. A client that waits out a window and comes back at once
	// meets no boundary burst, and one that comes back late pushes every
	// window after it later.
	AnchoredWindow
)

var algorithmNames = []string{"token-bucket", "leaky-bucket", "fixed-window", "sliding-window", "sliding-window-counter", "anchored-window"}

// String returns the algorithm's name as ParseAlgorithm accepts it, such as
// "token-bucket".
func (a Algorithm) String() string {
	if a >= 0 && int(a) < len(algorithmNames) {
		return algorithmNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", int(a))
}

// ParseAlgorithm returns the Algorithm named s: "token-bucket",
// "leaky-bucket" (or "gcra"), "fixed-window", "sliding-window",
// "sliding-window-counter" or "anchored-window".
func ParseAlgorithm(s string) (Algorithm, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "gcra" {
		return LeakyBucket, nil
	}
	for i, name := range algorithmNames {
		if s == name {
			return Algorithm(i), nil
		}
	}
	return 0, fmt.Errorf("fakeserver: unknown algorithm %q (want one of %s)", s, strings.Join(algorithmNames, ", "))
}

// DefaultStatsPath is where a Server answers with its Stats as JSON unless
// Config.StatsPath says otherwise.
const DefaultStatsPath = "/_stats"

// WaitHeader is the header Config.TellWaits adds.
const WaitHeader = "Fakeserver-Wait-Until"

// Config describes a Server. The zero value is a valid configuration: one
// global token bucket of 50 requests per second with a burst of 1, answering
// 429 with Retry-After in whole seconds.
type Config struct {
	// Algorithm is the limiting algorithm. The zero value is TokenBucket.
	Algorithm Algorithm

	// Limit is the number of requests admitted per Window, for each key.
	// Zero or negative means 50.
	Limit int

	// Window is the period Limit applies to. Zero or negative means one
	// second. The limiters are exact to the nanosecond, as long as
	// Burst·Window and Limit·Window (in nanoseconds) fit an int64.
	Window time.Duration

	// Burst is the capacity of the bucket for TokenBucket and LeakyBucket:
	// the number of requests a rested key can send at once. Zero or negative
	// means 1, strict pacing, which makes a client that bursts visible at
	// once. The window algorithms ignore it.
	Burst int

	// Now is the server's clock. Nil means time.Now, which also follows the
	// fake clock inside a testing/synctest bubble.
	Now func() time.Time

	// ClockSkew is added to the server's clock wherever it is shown to the
	// client: the Date header of every response, HTTP dates and epoch
	// timestamps in rate-limit headers, and the boundaries of FixedWindow
	// and SlidingWindowCounter. The other limiters measure only spans of
	// the server's clock. A positive skew makes the server's clock run
	// ahead of the client's.
	ClockSkew time.Duration

	// ClockDrift is how much the server's clock gains on Now each second
	// (a negative drift loses): its skew is ClockSkew + ClockDrift·(t -
	// DriftFrom) in seconds, as a clock no one keeps in step drifts, or
	// one that NTP slews does. Every limiter runs on the server's clock,
	// so a server that gains 10 ms a second counts its windows 1 % short
	// and refills 1 % fast in Now's time; Dates and stated instants are
	// on it too, so a client's estimate of the offset goes stale.
	// Stats and Config.TellWaits stay on Now's clock. It is bounded to
	// less than a second a second either way. Zero means none.
	ClockDrift time.Duration

	// DriftFrom is when the server's skew is ClockSkew. The zero value
	// means when New is called.
	DriftFrom time.Time

	// ResetAtWindowEnd makes a SlidingWindowCounter state the end of its
	// present fixed window as the time its quota is reset (State.ResetAfter),
	// as Upstash's and many limiters over Redis do, instead of when its
	// quota is back in full (up to two windows on). The window's end is
	// no reset: after it the previous window's count still weighs, and a
	// client that takes it for one is throttled.
	ResetAtWindowEnd bool

	// StatedLimit and StatedWindow are the policy the Dialect publishes
	// (State.Limit and State.Window), when the server states another limit
	// than the one it enforces: "600 per minute" over a bucket that holds
	// 20. Zero means Limit and Window.
	StatedLimit  int
	StatedWindow time.Duration

	// Global is a second limit, counted over all the requests of a token
	// (GlobalKey) whatever their key: Discord's global rate limit over its
	// per-route buckets. A request must pass both; one the global limit
	// rejects spends nothing of its key's and is answered with
	// State.Global set. The zero value adds none.
	Global GlobalLimit

	// Key maps a request to the key whose limit it counts against. Nil means
	// one limit for all requests. See KeyByHeader and KeyByRemoteIP.
	Key func(*http.Request) string

	// MaxKeys bounds the number of keys tracked at once. When it is exceeded,
	// keys at rest are forgotten first (which changes nothing), then the least
	// recently seen key. Zero or negative means 100000.
	MaxKeys int

	// Handler answers admitted requests. Nil means a small JSON body such as
	// {"path":"/items/1"} with status 200.
	Handler http.Handler

	// Dialect writes the rate-limit headers and the rejection response.
	// Nil means RetryAfterSeconds{}: 429 with Retry-After in whole seconds.
	Dialect Dialect

	// StatsPath is the path where the server answers with its Stats as JSON.
	// Requests to it are neither limited nor counted. Empty means
	// DefaultStatsPath, "/_stats".
	StatsPath string

	// TellWaits adds the header WaitHeader to every rejection that names
	// a wait (a Retry-After, or a quota said to be spent and when it comes
	// back): the instant the request's key was told to wait until, as
	// Unix nanoseconds of the server's own clock less ClockSkew (the clock
	// Config.Now reads), followed by "; global" when the wait is the
	// token's (Config.Global). A harness in the client's process reads it
	// to tell whether the client sent a request inside a wait it had
	// already been told of (see bench.RunShape); clients ignore it.
	TellWaits bool

	// MaxInFlight bounds the requests of one key (Key) the server works on
	// at once, from when it admits one until its answer is written
	// (Faults.Latency included), as Stripe's concurrency limiter and
	// GitHub's cap on concurrent requests do. A request that arrives while
	// its key has MaxInFlight in progress is rejected as the Dialect
	// rejects, with a wait of a second where the Dialect names one and no
	// quota stated; it spends nothing of the limit and counts in
	// Stats.Rejected. Zero or negative means no bound.
	MaxInFlight int

	// Faults adds failures to the responses. The zero value adds none.
	Faults Faults

	// Penalty punishes a key that exceeds its limit: a block much longer
	// than the Window, perhaps restarted by each request during it, and a
	// ban after repeated violations. The zero value punishes nothing.
	Penalty Penalty
}

// GlobalLimit is a limit shared by every key of a token; see Config.Global.
type GlobalLimit struct {
	// Algorithm, Limit, Window and Burst are as in Config. Limit zero or
	// negative means no global limit.
	Algorithm Algorithm
	Limit     int
	Window    time.Duration
	Burst     int
	// Key maps a request to its token. Nil means one global limit for all
	// requests.
	Key func(*http.Request) string
}

// Faults describes failures a Server injects, for testing retries, breakers
// and timeouts. Faults are decided when a request arrives, before the limiter,
// and a request that meets one spends no quota. Random faults draw from a
// generator seeded with Seed, so a sequential run is repeatable.
type Faults struct {
	// Outage is how the server fails during an outage (see
	// Server.SetOutage). The zero value, OutageError, answers OutageStatus.
	Outage OutageShape

	// OutageStatus is the status of the responses of an outage: at once for
	// OutageError, after OutageDelay for OutageSlow. Zero means 500 Internal
	// Server Error.
	OutageStatus int

	// OutageDelay is how long an OutageSlow response takes. Zero means one
	// second.
	OutageDelay time.Duration

	// ErrorRate is the share of requests, from 0 to 1, answered with
	// ErrorStatus at random.
	ErrorRate float64

	// ErrorStatus is the status of random errors. Zero means 500.
	ErrorStatus int

	// ResetRate is the share of requests, from 0 to 1, whose connection is
	// reset without a response (a TCP RST where the connection allows it).
	ResetRate float64

	// Latency is added to every response. The wait ends early, and no
	// response is written, if the request's context is done.
	Latency time.Duration

	// Jitter adds a random latency, uniform in [0, Jitter), to Latency.
	Jitter time.Duration

	// Handshake, with Handshakes, holds each of the first Handshakes
	// requests the server gets for a random time, uniform in [0,
	// Handshake), before it counts it, as opening that many connections
	// at once (TCP, TLS) spreads a flight that left a client together: a
	// bucket refills while the flight arrives. Stats.Ignored counts such a
	// request as of when it came in, not when it was counted (it could not
	// have heard of a wait named meanwhile); Stats.Early, as of when it
	// was counted. Zero in either means no hold.
	Handshake  time.Duration
	Handshakes int

	// Seed seeds the random generator for ErrorRate, ResetRate, Jitter and
	// Handshake.
	Seed uint64
}

// withDefaults returns cfg with its zero values replaced by the defaults.
func (cfg Config) withDefaults() Config {
	if cfg.Limit <= 0 {
		cfg.Limit = 50
	}
	if cfg.Window <= 0 {
		cfg.Window = time.Second
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 1
	}
	if cfg.StatedLimit <= 0 {
		cfg.StatedLimit = cfg.Limit
	}
	if cfg.StatedWindow <= 0 {
		cfg.StatedWindow = cfg.Window
	}
	if g := &cfg.Global; g.Limit > 0 {
		if g.Window <= 0 {
			g.Window = time.Second
		}
		if g.Burst <= 0 {
			g.Burst = 1
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.ClockDrift = clampDrift(cfg.ClockDrift)
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = 100000
	}
	if cfg.Dialect == nil {
		cfg.Dialect = RetryAfterSeconds{}
	}
	if cfg.StatsPath == "" {
		cfg.StatsPath = DefaultStatsPath
	}
	cfg.Penalty = cfg.Penalty.withDefaults()
	if cfg.Faults.OutageDelay <= 0 {
		cfg.Faults.OutageDelay = time.Second
	}
	if cfg.Faults.OutageStatus == 0 {
		cfg.Faults.OutageStatus = http.StatusInternalServerError
	}
	if cfg.Faults.ErrorStatus == 0 {
		cfg.Faults.ErrorStatus = http.StatusInternalServerError
	}
	return cfg
}

// KeyByHeader returns a Config.Key that limits each value of the request
// header name separately, such as an API token.
func KeyByHeader(name string) func(*http.Request) string {
	return func(r *http.Request) string { return r.Header.Get(name) }
}

// KeyByRemoteIP is a Config.Key that limits each client IP address
// separately.
func KeyByRemoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
