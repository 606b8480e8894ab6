package fakeserver

import (
	"net/http"
	"net/url"
	"time"
)

// A Shape is a server that says less than the whole truth about its limit,
// as the servers of real providers do: a stated limit larger than the
// burst it allows, resets rounded to the second, fixed windows on a skewed
// clock, route buckets under a global window, or nothing but 429s. Tests
// and benchmarks run clients against each one.
type Shape struct {
	// Name names the shape, such as "fixed-window-epoch-reset".
	Name string
	// Says is what the server tells its clients, in a few words.
	Says string
	// Config is the server. Its Faults add 20 ms of latency and up to 5 ms
	// of jitter.
	Config Config
	// Rate (requests per second) and Burst are what the server really
	// admits in the long run and at once: the least time for n requests
	// is (n - Burst) / Rate.
	Rate  float64
	Burst int
	// Published is the limit a user would configure from the provider's
	// documentation: Count requests per Period, in bursts of Burst.
	Published struct {
		Count  int
		Period time.Duration
		Burst  int
	}
	// Paths are the request paths, used in turn; nil means one.
	Paths []string
}

// shapeFaults is the latency of every shape. Every shape also tells its
// waits (Config.TellWaits), for an Observer.
var shapeFaults = Faults{Latency: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, Seed: 1}

func shape(name, says string, cfg Config, rate float64, burst, count int, period time.Duration, pburst int) Shape {
	cfg.Faults, cfg.TellWaits = shapeFaults, true
	s := Shape{Name: name, Says: says, Config: cfg, Rate: rate, Burst: burst}
	s.Published.Count, s.Published.Period, s.Published.Burst = count, period, pburst
	return s
}

// RoundedShapes are the servers of headway's issue 15: each states what
// remains, in a form that bounds the truth without stating it.
func RoundedShapes() []Shape {
	return []Shape{
		shape("ietf-bucket-t-rounded", "token bucket 20/s burst 10; RateLimit-Policy q=20;w=1 and RateLimit r, t in whole seconds rounded up",
			Config{Limit: 20, Burst: 10, Dialect: IETF{}}, 20, 10, 20, time.Second, 20),
		shape("openai-600-per-minute", "token bucket 10/s burst 20 stating 600 per minute; remaining and time until full (1.9s)",
			Config{Limit: 10, Burst: 20, StatedLimit: 600, StatedWindow: time.Minute, Dialect: OpenAI{}}, 10, 20, 600, time.Minute, 600),
		shape("fixed-window-epoch-reset", "fixed windows of 30 per 3 s; RateLimit-Remaining and RateLimit-Reset in epoch seconds; bare 429s",
			Config{Algorithm: FixedWindow, Limit: 30, Window: 3 * time.Second, Dialect: IETF06{EpochReset: true, NoRetryAfter: true, NoLimit: true}},
			10, 30, 30, 3*time.Second, 30),
		shape("shopify-retry-after-1.0", "leaky bucket of 40 draining 10/s; X-Shopify-Shop-Api-Call-Limit level/40; 429 with Retry-After: 1.0",
			Config{Algorithm: LeakyBucket, Limit: 10, Burst: 40, Dialect: Shopify{Round: time.Second}}, 10, 40, 10, time.Second, 40),
	}
}

// SparseShapes are the servers of headway's issue 12: each says less, or
// says it on a clock or in buckets the client must work out.
func SparseShapes() []Shape {
	routes := map[string]string{"/a": "ab", "/b": "ab", "/c": "c", "/d": "d", "/e": "e", "/f": "f"}
	paths := []string{"/a", "/b", "/c", "/d", "/e", "/f"}
	byRoute := func(r *http.Request) string { return routes[r.URL.Path] }
	return []Shape{
		shape("fixed-window-date-skewed", "fixed windows of 20 per 2 s on a clock 30 s ahead; only Retry-After as an HTTP date",
			Config{Algorithm: FixedWindow, Limit: 20, Window: 2 * time.Second, ClockSkew: 30 * time.Second, Dialect: RetryAfterDate{}},
			10, 20, 20, 2*time.Second, 20),
		shape("anthropic-600-per-minute", "token bucket 10/s burst 10 stating 600 per minute; remaining and an RFC 3339 reset",
			Config{Limit: 10, Burst: 10, StatedLimit: 600, StatedWindow: time.Minute, Dialect: Anthropic{}}, 10, 10, 600, time.Minute, 600),
		{
			// Requests go to six routes in turn: two of them share a bucket,
			// which admits 5 of every 6 requests a second: 15/s in all.
			Name: "discord-routes", Says: "per-route fixed windows of 5 per 1 s over six routes, two of them in one bucket; Reset-After and Bucket",
			Config: Config{Algorithm: FixedWindow, Limit: 5, Window: time.Second, Key: byRoute, Dialect: Discord{}, Faults: shapeFaults, TellWaits: true},
			Rate:   15, Burst: 15, Paths: paths,
		},
		{
			Name: "discord-routes-global", Says: "the same under a global window of 10 per 1 s (X-RateLimit-Global)",
			Config: Config{Algorithm: FixedWindow, Limit: 5, Window: time.Second, Key: byRoute, Dialect: Discord{}, Faults: shapeFaults, TellWaits: true,
				Global: GlobalLimit{Algorithm: FixedWindow, Limit: 10, Window: time.Second}},
			Rate: 10, Burst: 10, Paths: paths,
		},
		shape("github-fixed-windows", "fixed windows of 100 per 10 s; X-RateLimit-* with an epoch reset; 403 when spent",
			Config{Algorithm: FixedWindow, Limit: 100, Window: 10 * time.Second, Dialect: GitHub{}}, 10, 100, 100, 10*time.Second, 100),
		shape("retry-after-only", "token bucket 20/s burst 10; 429 with Retry-After in whole seconds, nothing else",
			Config{Limit: 20, Burst: 10, Dialect: RetryAfterSeconds{}}, 20, 10, 20, time.Second, 10),
		shape("bare-429", "token bucket 20/s burst 10; bare 429s",
			Config{Limit: 20, Burst: 10, Dialect: Bare{}}, 20, 10, 20, time.Second, 10),
	}
}

// AlgorithmShapes are servers whose algorithm or clock the shapes above do
// not cover, each answering in the forms that matter to a client that is
// told no limit: a Retry-After in whole seconds and nothing else, a bare
// 429, GitHub's X-RateLimit-* with an epoch reset (a 403 when spent), and
// the IETF draft's RateLimit with its policy and a reset delta. The
// algorithms: the sliding window counter (SlidingWindowCounter: Cloudflare,
// limiters over Redis), stating when its quota is full again or, as
// Upstash's does, the end of its present window (ResetAtWindowEnd),
// windows that begin at a key's first request
// (AnchoredWindow: INCR and EXPIRE, GitHub's hour), and fixed windows on a
// clock 30 s ahead that loses a millisecond a second (ClockDrift), over
// which a client's estimate of the offset goes stale (run them a minute
// or more: a drift shows over time).
func AlgorithmShapes() []Shape {
	answers := []struct {
		name string
		d    Dialect
	}{{"retry-after", RetryAfterSeconds{}}, {"bare-429", Bare{}}, {"github", GitHub{}}, {"ietf", IETF{}}}
	var shapes []Shape
	for _, a := range answers {
		shapes = append(shapes,
			shape("sliding-window-counter-"+a.name, "sliding window counter of 20 per 2 s (the previous window weighted by its overlap); "+a.name,
				Config{Algorithm: SlidingWindowCounter, Limit: 20, Window: 2 * time.Second, Dialect: a.d}, 10, 20, 20, 2*time.Second, 20),
			shape("anchored-window-"+a.name, "windows of 20 per 2 s that begin at a key's first request; "+a.name,
				Config{Algorithm: AnchoredWindow, Limit: 20, Window: 2 * time.Second, Dialect: a.d}, 10, 20, 20, 2*time.Second, 20),
			shape("fixed-window-drifting-"+a.name, "fixed windows of 20 per 2 s on a clock 30 s ahead that loses 1 ms a second; "+a.name,
				Config{Algorithm: FixedWindow, Limit: 20, Window: 2 * time.Second, ClockSkew: 30 * time.Second, ClockDrift: -time.Millisecond, Dialect: a.d},
				10, 20, 20, 2*time.Second, 20),
		)
		if a.name == "github" || a.name == "ietf" { // the answers that state a reset
			shapes = append(shapes, shape("sliding-window-counter-window-end-"+a.name,
				"the same counter stating the end of its present window as its reset (Upstash); "+a.name,
				Config{Algorithm: SlidingWindowCounter, Limit: 20, Window: 2 * time.Second, ResetAtWindowEnd: true, Dialect: a.d}, 10, 20, 20, 2*time.Second, 20))
		}
	}
	return shapes
}

// Least returns the least time in which the server could admit n
// requests, the first of them sent at start, to Paths in turn: (n - Burst)
// / Rate for a bucket. For fixed windows, it is the time from start to the
// beginning of the window that admits the last request, on the server's
// clock: each key of the server (Config.Key of each request) admits Limit a
// window, so the key that takes the most requests needs the most windows;
// with a Global fixed window, so does the token. A mix of routes that sends
// 53 requests to a bucket of 5 a window needs 11 windows, whatever the
// others need. For anchored windows it is the same without the phase (the
// first request begins the first window); for a sliding window counter,
// the rest of the window holding start, where Limit go at once, then the
// time into the windows after it that lets the rest through: Limit a
// window, the j-th of a window once j-1 of the previous window's Limit have
// faded, (j-1)/Limit of it. Windows are measured on the server's clock
// (ClockDrift shortens or lengthens them); a drift counts from start
// unless Config.DriftFrom is set.
func (s Shape) Least(n int, start time.Time) time.Duration {
	cfg := s.Config.withDefaults()
	switch cfg.Algorithm {
	case FixedWindow, SlidingWindowCounter, AnchoredWindow:
	default:
		return time.Duration(float64(max(n-s.Burst, 0)) / s.Rate * float64(time.Second))
	}
	clock := cfg.clock(start)
	paths := s.Paths
	if len(paths) == 0 {
		paths = []string{"/items"}
	}
	keys, tokens := map[string]int{}, map[string]int{}
	for i := range n {
		r := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: paths[i%len(paths)]}, Header: http.Header{}}
		k, tok := "", ""
		if cfg.Key != nil {
			k = cfg.Key(r)
		}
		if cfg.Global.Key != nil {
			tok = cfg.Global.Key(r)
		}
		keys[k]++
		tokens[tok]++
	}
	least := time.Duration(0)
	phaseOf := func(w time.Duration) int64 { return floorMod(clock.at(start.UnixNano()), int64(w)) }
	windows := func(counts map[string]int, alg Algorithm, limit int, w time.Duration) {
		most := 0
		for _, c := range counts {
			most = max(most, c)
		}
		if most <= limit {
			return
		}
		var d int64 // on the server's clock
		switch alg {
		case FixedWindow:
			d = int64((most+limit-1)/limit-1)*int64(w) - phaseOf(w)
		case AnchoredWindow:
			d = int64((most+limit-1)/limit-1) * int64(w)
		case SlidingWindowCounter:
			rest := most - limit
			j, q := (rest+limit-1)/limit, int64((rest-1)%limit)
			d = int64(w) - phaseOf(w) + int64(j-1)*int64(w) + q*int64(w)/int64(limit)
		}
		least = max(least, time.Duration(clock.span(d)))
	}
	windows(keys, cfg.Algorithm, cfg.Limit, cfg.Window)
	if g := cfg.Global; g.Limit > 0 && g.Algorithm == FixedWindow {
		windows(tokens, g.Algorithm, g.Limit, g.Window)
	}
	return least
}

// LeastFor is Least for a client of workers goroutines, each sending a
// request only once its last was answered, each answer taking at least
// Config.Faults.Latency. Least takes the window that holds start to admit
// its whole quota; begun near the window's end, those workers cannot get
// it there (8 of them, 20 ms a request, 7 ms before the end: 8 of 20),
// and the rest needs a window more. For a server of one fixed window
// (Config.Key, Paths and Global leave one key), the first window then
// counts what they can send before it ends; otherwise LeastFor is Least.
func (s Shape) LeastFor(n, workers int, start time.Time) time.Duration {
	cfg := s.Config.withDefaults()
	lat := cfg.Faults.Latency
	if cfg.Algorithm != FixedWindow || cfg.Global.Limit > 0 || len(s.Paths) > 1 || workers <= 0 || lat <= 0 || n <= cfg.Limit {
		return s.Least(n, start)
	}
	clock := cfg.clock(start)
	w := cfg.Window
	phase := time.Duration(floorMod(clock.at(start.UnixNano()), int64(w)))
	first := min(cfg.Limit, workers*(int(time.Duration(clock.span(int64(w-phase)))/lat)+1))
	windows := 1 + (n-first+cfg.Limit-1)/cfg.Limit
	return time.Duration(clock.span(int64(time.Duration(windows-1)*w - phase)))
}
