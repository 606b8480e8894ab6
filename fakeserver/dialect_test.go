package fakeserver

import (
	"io"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exchange is one request in a dialect scenario: advance the clock, send,
// and expect a status, headers (name: value, "" for absent) and a body part.
type exchange struct {
	advance time.Duration
	status  int
	headers map[string]string
	body    string
}

func runExchanges(t *testing.T, cfg Config, start time.Duration, xs []exchange) *Server {
	t.Helper()
	clk := newClock()
	clk.Advance(start)
	cfg.Now = clk.Now
	s := New(cfg)
	for i, x := range xs {
		clk.Advance(x.advance)
		resp := get(s, "/")
		body, _ := io.ReadAll(resp.Body)
		assert.Equal(t, x.status, resp.StatusCode, "exchange %d", i)
		for name, want := range x.headers {
			assert.Equal(t, want, resp.Header.Get(name), "exchange %d: %s", i, name)
		}
		assert.Contains(t, string(body), x.body, "exchange %d", i)
		assert.NotEmpty(t, resp.Header.Get("Date"), "exchange %d", i)
	}
	return s
}

func h(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func TestDialectBare(t *testing.T) {
	clk := newClock()
	s := New(Config{Limit: 1, Now: clk.Now, Dialect: Bare{}})
	get(s, "/")
	resp := get(s, "/")
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, http.Header{"Date": {"Tue, 10 Mar 2026 12:00:00 GMT"}}, resp.Header)
	body, _ := io.ReadAll(resp.Body)
	assert.Empty(t, body)
}

func TestDialectRetryAfterDate(t *testing.T) {
	runExchanges(t, Config{Algorithm: FixedWindow, Limit: 1, ClockSkew: 2 * time.Minute, Dialect: RetryAfterDate{}},
		300*time.Millisecond, []exchange{
			{0, 200, h("Retry-After", "", "Date", "Tue, 10 Mar 2026 12:02:00 GMT"), `{"path":"/"}`},
			// Exactly 0.7s to wait: the date rounds up, and is on the server's clock.
			{0, 429, h("Retry-After", "Tue, 10 Mar 2026 12:02:01 GMT", "Date", "Tue, 10 Mar 2026 12:02:00 GMT"), "too many"},
			{700 * time.Millisecond, 200, nil, ""},
		})
}

func TestDialectIETF(t *testing.T) {
	policy := h("RateLimit-Policy", `"default";q=3;w=10`)
	with := func(m map[string]string, kv ...string) map[string]string {
		for k, v := range policy {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	runExchanges(t, Config{Algorithm: FixedWindow, Limit: 3, Window: 10 * time.Second, Dialect: IETF{}},
		2500*time.Millisecond, []exchange{
			{0, 200, with(h("RateLimit", `"default";r=2;t=8`, "Retry-After", "")), ""},
			{0, 200, with(h("RateLimit", `"default";r=1;t=8`)), ""},
			{0, 200, with(h("RateLimit", `"default";r=0;t=8`)), ""},
			{0, 429, with(h("RateLimit", `"default";r=0;t=8`, "Retry-After", "8")), ""},
			{8 * time.Second, 200, with(h("RateLimit", `"default";r=2;t=10`)), ""},
		})
	hdr := http.Header{}
	IETF{Policy: `a"b\c`}.Header(hdr, State{Limit: 1, Window: time.Minute})
	assert.Equal(t, `"a\"b\\c";q=1;w=60`, hdr.Get("RateLimit-Policy"))
}

func TestDialectIETF06(t *testing.T) {
	runExchanges(t, Config{Algorithm: TokenBucket, Limit: 10, Burst: 2, Dialect: IETF06{}},
		0, []exchange{
			{0, 200, h("RateLimit-Limit", "2", "RateLimit-Remaining", "1", "RateLimit-Reset", "1"), ""},
			{0, 200, h("RateLimit-Limit", "2", "RateLimit-Remaining", "0", "RateLimit-Reset", "1"), ""},
			{0, 429, h("RateLimit-Remaining", "0", "Retry-After", "1"), ""},
			{time.Second, 200, h("RateLimit-Remaining", "1", "RateLimit-Reset", "1"), ""},
		})
}

func TestDialectGitHub(t *testing.T) {
	// t0 is on the hour; 15 minutes in, an hourly window resets at 13:00,
	// 1773147600, as in the github-ok vector.
	s := runExchanges(t, Config{Algorithm: FixedWindow, Limit: 3, Window: time.Hour, Dialect: GitHub{}},
		15*time.Minute, []exchange{
			{0, 200, h("X-Ratelimit-Limit", "3", "X-Ratelimit-Remaining", "2", "X-Ratelimit-Used", "1",
				"X-Ratelimit-Reset", "1773147600", "X-Ratelimit-Resource", "core"), ""},
			{0, 200, h("X-Ratelimit-Remaining", "1", "X-Ratelimit-Used", "2"), ""},
			{0, 200, h("X-Ratelimit-Remaining", "0", "X-Ratelimit-Used", "3"), ""},
			{0, 403, h("X-Ratelimit-Remaining", "0", "X-Ratelimit-Reset", "1773147600", "Retry-After", ""),
				`"message":"API rate limit exceeded.`},
			{44 * time.Minute, 403, h("X-Ratelimit-Remaining", "0"), ""}, // early
			{time.Minute, 200, h("X-Ratelimit-Remaining", "2", "X-Ratelimit-Reset", "1773151200"), ""},
		})
	assert.Equal(t, int64(1), s.Stats().Early)

	// With a server clock 30s ahead, the hour still ends at 13:00 on the
	// server's clock, where it counts its windows: 30 s sooner on ours.
	runExchanges(t, Config{Algorithm: FixedWindow, Limit: 1, Window: time.Hour, Dialect: GitHub{Resource: "search"}, ClockSkew: 30 * time.Second},
		15*time.Minute, []exchange{
			{0, 200, h("X-Ratelimit-Reset", "1773147600", "Date", "Tue, 10 Mar 2026 12:15:30 GMT", "X-Ratelimit-Resource", "search"), ""},
		})

	runExchanges(t, Config{Limit: 1, Window: 2 * time.Second, Dialect: GitHub{Secondary: true}},
		0, []exchange{
			{0, 200, nil, ""},
			{time.Second, 429, h("Retry-After", "1", "X-Ratelimit-Remaining", "0"), "secondary rate limit"},
		})
}

func TestDialectOpenAI(t *testing.T) {
	runExchanges(t, Config{Limit: 60, Window: time.Minute, Burst: 3, Dialect: OpenAI{}},
		0, []exchange{
			{0, 200, h("X-Ratelimit-Limit-Requests", "60", "X-Ratelimit-Remaining-Requests", "2", "X-Ratelimit-Reset-Requests", "1s"), ""},
			{0, 200, h("X-Ratelimit-Remaining-Requests", "1", "X-Ratelimit-Reset-Requests", "2s"), ""},
			{0, 200, h("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "3s"), ""},
			{0, 429, h("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "3s", "Retry-After", ""),
				`"code":"rate_limit_exceeded"`},
			{1500 * time.Millisecond, 200, h("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "2.5s"), ""},
			{time.Minute, 200, h("X-Ratelimit-Reset-Requests", "1s"), ""},
		})
	hdr := http.Header{}
	OpenAI{}.Header(hdr, State{ResetAfter: 546*time.Millisecond + 1})
	assert.Equal(t, "547ms", hdr.Get("X-Ratelimit-Reset-Requests"))
	OpenAI{}.Header(hdr, State{ResetAfter: 6 * time.Minute})
	assert.Equal(t, "6m0s", hdr.Get("X-Ratelimit-Reset-Requests"))
}

func TestDialectShopify(t *testing.T) {
	xs := []exchange{{0, 200, h("X-Shopify-Shop-Api-Call-Limit", "1/40"), ""}}
	for range 39 {
		xs = append(xs, exchange{0, 200, nil, ""})
	}
	xs[39].headers = h("X-Shopify-Shop-Api-Call-Limit", "40/40")
	xs = append(xs,
		exchange{0, 429, h("X-Shopify-Shop-Api-Call-Limit", "40/40", "Retry-After", "0.5"), "Exceeded 2 calls per second"},
		exchange{500 * time.Millisecond, 200, h("X-Shopify-Shop-Api-Call-Limit", "40/40"), ""},
		exchange{time.Second, 200, h("X-Shopify-Shop-Api-Call-Limit", "39/40"), ""},
	)
	runExchanges(t, Config{Algorithm: LeakyBucket, Limit: 2, Burst: 40, Dialect: Shopify{}}, 0, xs)

	hdr := http.Header{}
	Shopify{}.Reject(hdr, State{Limit: 1, Window: time.Second, RetryAfter: 2 * time.Second})
	assert.Equal(t, "2.0", hdr.Get("Retry-After"))
}

func TestDialectDiscord(t *testing.T) {
	ok := func(rem string) map[string]string {
		return h("X-Ratelimit-Limit", "5", "X-Ratelimit-Remaining", rem,
			"X-Ratelimit-Reset", "1773144005.000", "X-Ratelimit-Reset-After", "1.250", "X-Ratelimit-Bucket", "abcd1234")
	}
	runExchanges(t, Config{Algorithm: FixedWindow, Limit: 5, Window: 5 * time.Second, Dialect: Discord{Bucket: "abcd1234"}},
		3750*time.Millisecond, []exchange{
			{0, 200, ok("4"), ""},
			{0, 200, ok("3"), ""},
			{0, 200, ok("2"), ""},
			{0, 200, ok("1"), ""},
			{0, 200, ok("0"), ""},
			{0, 429, h("Retry-After", "2", "X-Ratelimit-Scope", "user", "X-Ratelimit-Reset-After", "1.250"),
				`{"message":"You are being rate limited.","retry_after":1.25,"global":false}`},
			{1250 * time.Millisecond, 200, h("X-Ratelimit-Remaining", "4", "X-Ratelimit-Reset-After", "5.000"), ""},
		})
	hdr := http.Header{}
	Discord{}.Header(hdr, State{Key: "a"})
	a := hdr.Get("X-Ratelimit-Bucket")
	Discord{}.Header(hdr, State{Key: "b"})
	assert.Regexp(t, `^[0-9a-f]{8}$`, a)
	assert.NotEqual(t, a, hdr.Get("X-Ratelimit-Bucket"))
}

// TestDialectsNeverAdviseEarly checks, over random limiter states, that the
// wait every dialect names is at least the limiter's exact wait, so that a
// client that obeys it is admitted.
func TestDialectsNeverAdviseEarly(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, name := range DialectNames {
		d, err := DialectByName(name)
		require.NoError(t, err)
		for _, alg := range []Algorithm{TokenBucket, LeakyBucket, FixedWindow, SlidingWindow} {
			cfg := Config{Algorithm: alg, Limit: 1 + rng.IntN(20), Window: time.Duration(1 + rng.Int64N(int64(5*time.Second))), Burst: 1 + rng.IntN(5)}.withDefaults()
			lim := newLimiter(&cfg)
			now := t0.Add(time.Duration(rng.Int64N(int64(time.Second))))
			for range 300 {
				dec := lim.take(now.UnixNano())
				st := State{Allowed: dec.allowed, Limit: cfg.Limit, Window: cfg.Window, Capacity: dec.capacity,
					Remaining: dec.remaining, ResetAfter: dec.resetAfter, NextAfter: dec.nextAfter, RetryAfter: dec.retryAfter, Now: now}
				hdr := http.Header{}
				d.Header(hdr, st)
				if !dec.allowed {
					rej := d.Reject(hdr, st)
					assert.GreaterOrEqual(t, rej.Status, 400)
					if rej.Wait != 0 {
						require.GreaterOrEqual(t, rej.Wait, dec.retryAfter, "%s %s", name, alg)
					}
				}
				now = now.Add(time.Duration(rng.Int64N(int64(cfg.Window) / int64(cfg.Limit))))
			}
		}
	}
	_, err := DialectByName("nope")
	assert.ErrorContains(t, err, "fakeserver: unknown dialect")
}
