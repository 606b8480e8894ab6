package preset

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sendRecorder is a base RoundTripper that records when each request was
// sent, by a label of the request, before handing it to base.
type sendRecorder struct {
	base  http.RoundTripper
	label func(*http.Request) string

	mu   sync.Mutex
	sent map[string][]time.Time
}

func newSendRecorder(base http.RoundTripper, label func(*http.Request) string) *sendRecorder {
	return &sendRecorder{base: base, label: label, sent: make(map[string][]time.Time)}
}

func (r *sendRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	l := r.label(req)
	r.mu.Lock()
	r.sent[l] = append(r.sent[l], time.Now())
	r.mu.Unlock()
	return r.base.RoundTrip(req)
}

func (r *sendRecorder) times(label string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sent[label])
}

func byPath(req *http.Request) string { return req.URL.Path }
func byHost(req *http.Request) string { return req.URL.Host }

// sendN sends the requests newReq(0) to newReq(n-1) through rt from
// workers goroutines, draining every response, and fails t on an error or
// a status other than 200.
func sendN(t *testing.T, rt http.RoundTripper, workers, n int, newReq func(i int) *http.Request) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		next = make(chan int)
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				resp, err := rt.RoundTrip(newReq(i))
				if !assert.NoError(t, err) {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode, "request %d", i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// newGet returns a GET request for url with the header name set to value.
func newGet(url, name, value string) *http.Request {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		panic(err)
	}
	if name != "" {
		req.Header.Set(name, value)
	}
	return req
}

// checkPace fails t if the sorted times ever run faster than l allows:
// j-i+1 requests need (j-i+1-burst) intervals.
func checkPace(t *testing.T, times []time.Time, l headway.Limit) {
	t.Helper()
	iv, b := l.Interval(), burst(l)
	for i := range times {
		for j := i + b; j < len(times); j++ {
			if need := time.Duration(j-i+1-b) * iv; times[j].Sub(times[i]) < need {
				t.Errorf("requests %d to %d sent within %v; %v allows no less than %v", i, j, times[j].Sub(times[i]), l, need)
				return
			}
		}
	}
}

// burst is the units l lets leave at once: its Burst, at least 1.
func burst(l headway.Limit) int { return max(l.Burst, 1) }

// checkSpan fails t if the n sorted times span much more than a limit of
// l needs for them: pacing to the limit, not well below it.
func checkSpan(t *testing.T, times []time.Time, l headway.Limit) {
	t.Helper()
	if len(times) == 0 {
		t.Fatal("no requests sent")
	}
	want := time.Duration(max(len(times)-burst(l), 0)) * l.Interval()
	got := times[len(times)-1].Sub(times[0])
	assert.LessOrEqual(t, got, want+want/10+time.Second, "%d requests under %v", len(times), l)
}

// checkServer fails t if srv rejected a request or saw one come early.
func checkServer(t *testing.T, srv *fakeserver.Server) {
	t.Helper()
	st := srv.Stats()
	assert.Zero(t, st.Rejected, "rejected: %+v", st)
	assert.Zero(t, st.Early, "early: %+v", st)
}

func TestPresetGitHub(t *testing.T) {
	p := GitHub()
	l := p.Limits[0]
	assert.Equal(t, 720*time.Millisecond, l.Interval())

	// GitHub counts 5,000 requests in a fixed hour per token.
	cfg := fakeserver.Config{
		Algorithm: fakeserver.FixedWindow, Limit: 5000, Window: time.Hour,
		Dialect: fakeserver.GitHub{}, Key: fakeserver.KeyByHeader("Authorization"),
	}
	t.Run("pace", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := fakeserver.New(cfg)
			rec := newSendRecorder(srv.Transport(), byHost)
			tr := headway.New(rec, p)
			sendN(t, tr, 8, 300, func(i int) *http.Request {
				return newGet(fmt.Sprintf("https://api.github.com/repos/o/r/issues/%d", i), "Authorization", "Bearer a")
			})
			times := rec.times("api.github.com")
			checkServer(t, srv)
			checkPace(t, times, l)
			checkSpan(t, times, l)
		})
	})
	t.Run("hour", func(t *testing.T) {
		// Past the end of the first hour: the even pace fits the fixed
		// hour's 5,000.
		synctest.Test(t, func(t *testing.T) {
			srv := fakeserver.New(cfg)
			tr := headway.New(srv.Transport(), p)
			sendN(t, tr, 8, 5300, func(i int) *http.Request {
				return newGet("https://api.github.com/user", "Authorization", "Bearer a")
			})
			checkServer(t, srv)
			assert.LessOrEqual(t, srv.PeakRate(time.Hour), 5000)
		})
	})
	t.Run("tokens", func(t *testing.T) {
		// Two tokens have a pacer each: the second is not held up by the
		// first.
		synctest.Test(t, func(t *testing.T) {
			srv := fakeserver.New(cfg)
			rec := newSendRecorder(srv.Transport(), func(r *http.Request) string { return r.Header.Get("Authorization") })
			tr := headway.New(rec, p)
			sendN(t, tr, 8, 240, func(i int) *http.Request {
				return newGet("https://api.github.com/user", "Authorization", fmt.Sprintf("Bearer %d", i%2))
			})
			checkServer(t, srv)
			for _, tok := range []string{"Bearer 0", "Bearer 1"} {
				times := rec.times(tok)
				assert.Len(t, times, 120)
				checkSpan(t, times, l)
			}
		})
	})
}

func TestPresetGitHubSearch(t *testing.T) {
	p := GitHubSearch()
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{
			Algorithm: fakeserver.FixedWindow, Limit: 30, Window: time.Minute,
			Dialect: fakeserver.GitHub{Resource: "search"}, Key: fakeserver.KeyByHeader("Authorization"),
		})
		rec := newSendRecorder(srv.Transport(), byHost)
		tr := headway.New(rec, p)
		sendN(t, tr, 4, 100, func(i int) *http.Request {
			return newGet(fmt.Sprintf("https://api.github.com/search/issues?q=%d", i), "Authorization", "Bearer a")
		})
		times := rec.times("api.github.com")
		checkServer(t, srv)
		checkPace(t, times, p.Limits[0])
		checkSpan(t, times, p.Limits[0])
	})
}

func TestPresetShopifyREST(t *testing.T) {
	for _, tc := range []struct {
		plan         ShopifyPlan
		rate, bucket int
	}{
		{ShopifyStandard, 2, 40},
		{ShopifyAdvanced, 4, 80},
		{ShopifyPlus, 20, 400},
	} {
		t.Run(fmt.Sprint(tc.plan), func(t *testing.T) {
			p := ShopifyREST("acme.myshopify.com", tc.plan)
			synctest.Test(t, func(t *testing.T) {
				// A leaky bucket per app and store, as Shopify's.
				srv := fakeserver.New(fakeserver.Config{
					Algorithm: fakeserver.LeakyBucket, Limit: tc.rate, Burst: tc.bucket,
					Dialect: fakeserver.Shopify{}, Key: fakeserver.KeyByHeader("X-Shopify-Access-Token"),
				})
				rec := newSendRecorder(srv.Transport(), byHost)
				tr := headway.New(rec, p)
				n := 5 * tc.bucket
				sendN(t, tr, 8, n, func(i int) *http.Request {
					return newGet(fmt.Sprintf("https://acme.myshopify.com/admin/api/2025-01/products/%d.json", i), "X-Shopify-Access-Token", "shpat_1")
				})
				times := rec.times("acme.myshopify.com")
				checkServer(t, srv)
				checkPace(t, times, p.Limits[0])
				checkSpan(t, times, p.Limits[0])
			})
		})
	}
	assert.Panics(t, func() { ShopifyREST("acme.myshopify.com", ShopifyPlan(9)) })
}

func TestPresetStripe(t *testing.T) {
	endpoint := func(r *http.Request) string { return r.Method + " " + stripeEndpoint(r.URL.Path) }
	t.Run("live", func(t *testing.T) {
		p := StripeLive()
		synctest.Test(t, func(t *testing.T) {
			// 25 a second per endpoint; Stripe's 429s say nothing more.
			srv := fakeserver.New(fakeserver.Config{Limit: 25, Burst: 5, Dialect: fakeserver.Bare{}, Key: endpoint})
			rec := newSendRecorder(srv.Transport(), func(r *http.Request) string { return stripeEndpoint(r.URL.Path) })
			tr := headway.New(rec, p)
			sendN(t, tr, 8, 400, func(i int) *http.Request {
				url := fmt.Sprintf("https://api.stripe.com/v1/customers/cus_%dAbC", i)
				if i%2 == 1 {
					url = fmt.Sprintf("https://api.stripe.com/v1/charges/ch_3Mx%dQ", i)
				}
				return newGet(url, "Authorization", "Bearer sk_live_x")
			})
			checkServer(t, srv)
			for _, e := range []string{"/v1/customers/{id}", "/v1/charges/{id}"} {
				times := rec.times(e)
				assert.Len(t, times, 200, e)
				checkPace(t, times, p.Limits[0])
				checkSpan(t, times, p.Limits[0])
			}
		})
	})
	t.Run("test", func(t *testing.T) {
		p := StripeTest()
		synctest.Test(t, func(t *testing.T) {
			// 25 a second in all.
			srv := fakeserver.New(fakeserver.Config{Limit: 25, Burst: 5, Dialect: fakeserver.Bare{}})
			rec := newSendRecorder(srv.Transport(), byHost)
			tr := headway.New(rec, p)
			sendN(t, tr, 8, 300, func(i int) *http.Request {
				url := "https://api.stripe.com/v1/customers"
				if i%2 == 1 {
					url = "https://api.stripe.com/v1/charges"
				}
				return newGet(url, "Authorization", "Bearer sk_test_x")
			})
			times := rec.times("api.stripe.com")
			checkServer(t, srv)
			checkPace(t, times, p.Limits[0])
			checkSpan(t, times, p.Limits[0])
		})
	})
}

func TestPresetDiscord(t *testing.T) {
	p := Discord()
	synctest.Test(t, func(t *testing.T) {
		// Sending messages: 5 per 5 s per channel, Discord's buckets.
		route := func(r *http.Request) string { return r.Method + " " + discordRoute(r.URL.Path) }
		srv := fakeserver.New(fakeserver.Config{
			Limit: 5, Window: 5 * time.Second, Burst: 5,
			Dialect: fakeserver.Discord{}, Key: route,
		})
		rec := newSendRecorder(srv.Transport(), func(r *http.Request) string { return discordRoute(r.URL.Path) })
		tr := headway.New(rec, p)
		post := func(channel int) func(int) *http.Request {
			return func(int) *http.Request {
				req := newGet(fmt.Sprintf("https://discord.com/api/v10/channels/%d/messages", channel), "Authorization", "Bot t")
				req.Method = http.MethodPost
				return req
			}
		}

		// One channel's bucket spent and its messages queued, another
		// channel's messages leave at once: a route is a key.
		var wg sync.WaitGroup
		wg.Go(func() { sendN(t, tr, 4, 30, post(100)) })
		time.Sleep(10 * time.Second)
		start := time.Now()
		sendN(t, tr, 4, 5, post(101))
		// (The last may wait a little on its own bucket's headers, but
		// not for the 20 messages queued before it on the other channel.)
		assert.Less(t, time.Since(start), 2*time.Second, "held up by another channel")
		wg.Wait()

		checkServer(t, srv)
		times := rec.times("/channels/100/messages")
		require.Len(t, times, 30)
		bucket := headway.Per(5, 5*time.Second).WithBurst(5)
		checkPace(t, times, bucket)
		checkSpan(t, times, bucket)
	})
}

func TestPresetSlack(t *testing.T) {
	for tier, perMinute := range map[int]int{1: 1, 2: 20, 3: 50, 4: 100} {
		t.Run(fmt.Sprint("tier", tier), func(t *testing.T) {
			p := Slack(tier)
			synctest.Test(t, func(t *testing.T) {
				// Per method, with a Retry-After on a 429.
				srv := fakeserver.New(fakeserver.Config{
					Limit: perMinute, Window: time.Minute,
					Key: func(r *http.Request) string { return r.URL.Path },
				})
				rec := newSendRecorder(srv.Transport(), byPath)
				tr := headway.New(rec, p)
				n := max(2*perMinute, 8)
				sendN(t, tr, 4, n, func(i int) *http.Request {
					url := "https://slack.com/api/conversations.history"
					if i%2 == 1 {
						url = "https://slack.com/api/users.info"
					}
					return newGet(url, "Authorization", "Bearer xoxb-1")
				})
				checkServer(t, srv)
				for _, m := range []string{"/api/conversations.history", "/api/users.info"} {
					times := rec.times(m)
					assert.Len(t, times, n/2, m)
					checkPace(t, times, p.Limits[0])
					checkSpan(t, times, p.Limits[0])
				}
			})
		})
	}
	for _, tier := range []int{0, 5} {
		assert.Panics(t, func() { Slack(tier) }, "tier %d", tier)
	}
}

func TestPresetOpenAI(t *testing.T) {
	t.Run("requests", func(t *testing.T) {
		p := OpenAI(500, 200000)
		synctest.Test(t, func(t *testing.T) {
			// 500 requests a minute, enforced a second at a time.
			srv := fakeserver.New(fakeserver.Config{
				Limit: 500, Window: time.Minute, Burst: 500 / 60,
				Dialect: fakeserver.OpenAI{}, Key: fakeserver.KeyByHeader("Authorization"),
			})
			rec := newSendRecorder(srv.Transport(), byHost)
			tr := headway.New(rec, p)
			sendN(t, tr, 8, 300, func(i int) *http.Request {
				return newGet("https://api.openai.com/v1/models", "Authorization", "Bearer sk-1")
			})
			times := rec.times("api.openai.com")
			checkServer(t, srv)
			checkPace(t, times, p.Limits[0])
			checkSpan(t, times, p.Limits[0])
		})
	})
	t.Run("tokens", func(t *testing.T) {
		// Requests of 1,000 tokens under 30,000 tokens a minute: 30 a
		// minute, in a burst of 30. The fake server counts requests, so
		// it is set to what the tokens allow.
		p := OpenAI(500, 30000)
		tokens := headway.Per(30, time.Minute).WithBurst(30)
		synctest.Test(t, func(t *testing.T) {
			srv := fakeserver.New(fakeserver.Config{
				Limit: 30, Window: time.Minute, Burst: 30,
				Dialect: fakeserver.OpenAI{}, Key: fakeserver.KeyByHeader("Authorization"),
			})
			rec := newSendRecorder(srv.Transport(), byHost)
			tr := headway.New(rec, p)
			sendN(t, tr, 8, 90, func(i int) *http.Request {
				req := newGet("https://api.openai.com/v1/chat/completions", "Authorization", "Bearer sk-1")
				return req.WithContext(headway.WithCost(req.Context(), 1000))
			})
			times := rec.times("api.openai.com")
			checkServer(t, srv)
			checkPace(t, times, tokens)
			checkSpan(t, times, tokens)
		})
	})
}

func TestPresetAnthropic(t *testing.T) {
	// 50 requests and 20,000 input tokens a minute (a first tier), each
	// request of 2,000 input tokens: the tokens allow 10 a minute, after
	// a burst of 10. The fake server counts requests, so it is set to
	// that.
	p := Anthropic(50, 20000)
	tokens := headway.Per(10, time.Minute).WithBurst(10)
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{
			Limit: 10, Window: time.Minute, Burst: 10,
			Dialect: fakeserver.IETF{}, Key: fakeserver.KeyByHeader("X-Api-Key"),
		})
		rec := newSendRecorder(srv.Transport(), byHost)
		tr := headway.New(rec, p)
		sendN(t, tr, 4, 40, func(i int) *http.Request {
			req := newGet("https://api.anthropic.com/v1/messages", "X-Api-Key", "sk-ant-1")
			return req.WithContext(headway.WithCost(req.Context(), 2000))
		})
		times := rec.times("api.anthropic.com")
		checkServer(t, srv)
		checkPace(t, times, tokens)
		checkSpan(t, times, tokens)

		// A request with no cost spends 1 token: only the 50 a minute
		// paces it.
		reqs := p.Limits[0]
		assert.Equal(t, 1200*time.Millisecond, reqs.Interval())
	})
}

func TestPresetNotion(t *testing.T) {
	p := Notion()
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{Limit: 3, Key: fakeserver.KeyByHeader("Authorization")})
		rec := newSendRecorder(srv.Transport(), byHost)
		tr := headway.New(rec, p)
		sendN(t, tr, 4, 100, func(i int) *http.Request {
			return newGet(fmt.Sprintf("https://api.notion.com/v1/pages/%d", i), "Authorization", "Bearer secret_1")
		})
		times := rec.times("api.notion.com")
		checkServer(t, srv)
		checkPace(t, times, p.Limits[0])
		checkSpan(t, times, p.Limits[0])
	})
}

// Two presets and a host without one on one Transport: each host is paced
// to its own limits, with its own keys, and none holds up another.
func TestPresetsOnOneTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gh := fakeserver.New(fakeserver.Config{
			Algorithm: fakeserver.FixedWindow, Limit: 5000, Window: time.Hour,
			Dialect: fakeserver.GitHub{}, Key: fakeserver.KeyByHeader("Authorization"),
		})
		notion := fakeserver.New(fakeserver.Config{Limit: 3, Key: fakeserver.KeyByHeader("Authorization")})
		other := fakeserver.New(fakeserver.Config{Limit: 10})
		servers := map[string]http.RoundTripper{
			"api.github.com": gh.Transport(),
			"api.notion.com": notion.Transport(),
			"api.example":    other.Transport(),
		}
		rec := newSendRecorder(mux(func(req *http.Request) http.RoundTripper {
			return servers[req.URL.Host]
		}), byHost)
		tr := headway.New(rec, headway.WithLimit(headway.PerSecond(10)), GitHub(), Notion())

		// The same token on every host: keys must not collide.
		var wg sync.WaitGroup
		for _, host := range []string{"api.github.com", "api.notion.com", "api.example"} {
			wg.Go(func() {
				sendN(t, tr, 4, 90, func(i int) *http.Request {
					return newGet(fmt.Sprintf("https://%s/x/%d", host, i), "Authorization", "Bearer same")
				})
			})
		}
		wg.Wait()
		for _, srv := range []*fakeserver.Server{gh, notion, other} {
			checkServer(t, srv)
		}

		// Each host at its own pace: GitHub at one request every 720 ms,
		// Notion at 3 a second, the other host at 10.
		for host, l := range map[string]headway.Limit{"api.github.com": headway.Per(5000, time.Hour), "api.notion.com": headway.PerSecond(3), "api.example": headway.PerSecond(10)} {
			times := rec.times(host)
			require.Len(t, times, 90, host)
			checkPace(t, times, l)
			checkSpan(t, times, l)
		}
	})
}

func TestPresetKeys(t *testing.T) {
	req := func(method, url string, header ...string) *http.Request {
		r := newGet(url, "", "")
		r.Method = method
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		return r
	}
	host := func(r *http.Request) string { return "host:" + r.URL.Host }
	// The keys are seen as the Transport makes them, through OnThrottle:
	// every request gets a 429, which is not retried.
	var (
		mu  sync.Mutex
		got string
	)
	opts := []headway.Option{
		headway.WithKey(host),
		GitHub(), Discord(), Slack(2), StripeLive(), Anthropic(50, 20000), ShopifyREST("acme.myshopify.com", ShopifyStandard),
		headway.WithRetry(headway.RetryOptions{MaxAttempts: 1}),
		headway.WithHooks(headway.Hooks{OnThrottle: func(e headway.ThrottleEvent) { mu.Lock(); got = e.Key; mu.Unlock() }}),
	}
	keyOf := func(opts []headway.Option, req *http.Request) string {
		var key string
		synctest.Test(t, func(t *testing.T) {
			tr := headway.New(rejectAll{}, opts...)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			mu.Lock()
			key, got = got, ""
			mu.Unlock()
		})
		return key
	}
	for _, tc := range []struct {
		req  *http.Request
		want string
	}{
		{req("GET", "https://api.github.com/repos/o/r", "Authorization", "token a"), "api.github.com\x00token a\x00core"},
		{req("GET", "https://API.GitHub.com:443/repos/o/r", "Authorization", "token a"), "API.GitHub.com:443\x00token a\x00core"},
		{req("GET", "https://api.github.com/search/issues?q=x", "Authorization", "token a"), "api.github.com\x00token a\x00search"},
		{req("GET", "https://api.github.com/search/code?q=x", "Authorization", "token a"), "api.github.com\x00token a\x00code_search"},
		{req("POST", "https://api.github.com/graphql", "Authorization", "token a"), "api.github.com\x00token a\x00graphql"},
		{req("POST", "https://discord.com/api/v10/channels/123/messages", "Authorization", "Bot t"), "discord.com\x00Bot t\x00POST /channels/123/messages"},
		{req("DELETE", "https://discord.com/api/v10/channels/123/messages/456", "Authorization", "Bot t"), "discord.com\x00Bot t\x00DELETE /channels/123/messages/{id}"},
		{req("PUT", "https://discord.com/api/v9/channels/123/messages/456/reactions/%F0%9F%91%8D/@me", "Authorization", "Bot t"), "discord.com\x00Bot t\x00PUT /channels/123/messages/{id}/reactions/{emoji}/@me"},
		{req("POST", "https://discord.com/api/webhooks/9/tok", ""), "discord.com\x00\x00POST /webhooks/9/tok"},
		{req("GET", "https://discord.com/api/guilds/7/members/8", "Authorization", "Bot t"), "discord.com\x00Bot t\x00GET /guilds/7/members/{id}"},
		{req("POST", "https://slack.com/api/chat.postMessage", "Authorization", "Bearer xoxb"), "slack.com\x00Bearer xoxb\x00/api/chat.postMessage"},
		{req("GET", "https://api.stripe.com/v1/customers/cus_NffrFeUfNV2Hib", "Authorization", "Bearer sk"), "api.stripe.com\x00Bearer sk\x00GET /v1/customers/{id}"},
		{req("POST", "https://api.stripe.com/v1/payment_intents/pi_3MtwBwLkdIwHu7ix28a3tqPa/confirm", "Authorization", "Bearer sk"), "api.stripe.com\x00Bearer sk\x00POST /v1/payment_intents/{id}/confirm"},
		{req("GET", "https://api.stripe.com/v1/checkout/sessions", "Authorization", "Bearer sk"), "api.stripe.com\x00Bearer sk\x00GET /v1/checkout/sessions"},
		{req("POST", "https://api.anthropic.com/v1/messages", "X-Api-Key", "k", "Authorization", "Bearer o"), "api.anthropic.com\x00k"},
		{req("POST", "https://api.anthropic.com/v1/messages", "Authorization", "Bearer o"), "api.anthropic.com\x00Bearer o"},
		{req("GET", "https://acme.myshopify.com/admin/api/2025-01/shop.json", "X-Shopify-Access-Token", "s"), "acme.myshopify.com\x00s"},
		// Other hosts keep the KeyFunc set before the presets.
		{req("GET", "https://api.example/x", "Authorization", "token a"), "host:api.example"},
		{req("GET", "https://other.myshopify.com/x", "X-Shopify-Access-Token", "s"), "host:other.myshopify.com"},
	} {
		assert.Equal(t, tc.want, keyOf(opts, tc.req), "%s %s", tc.req.Method, tc.req.URL)
	}

	// A WithKey after the presets replaces their keys too.
	assert.Equal(t, "host:api.github.com", keyOf(append(opts, headway.WithKey(host)), req("GET", "https://api.github.com/x")))
}

// rejectAll is a base RoundTripper that answers every request with a 429.
type rejectAll struct{}

func (rejectAll) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

func TestPresetInvalid(t *testing.T) {
	assert.Panics(t, func() { headway.New(nil, OpenAI(0, 1000)) })
	assert.Panics(t, func() { headway.New(nil, Anthropic(50, -1)) })
}

func TestGitHubAndItsSearchOnOneTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newSendRecorder(mux(func(*http.Request) http.RoundTripper { return rejectNone{} }), byPath)
		tr := headway.New(rec, GitHub(), GitHubSearch())
		start := time.Now()
		sendN(t, tr, 1, 3, func(int) *http.Request { return newGet("https://api.github.com/search/issues?q=x", "", "") })
		assert.Equal(t, []time.Duration{0, 2 * time.Second, 4 * time.Second}, offsets(start, rec.times("/search/issues")), "search: 30 a minute")
		start = time.Now()
		sendN(t, tr, 1, 3, func(int) *http.Request { return newGet("https://api.github.com/repos/a/b", "", "") })
		assert.Equal(t, []time.Duration{0, 720 * time.Millisecond, 1440 * time.Millisecond}, offsets(start, rec.times("/repos/a/b")), "core: 5,000 an hour")
	})
}

// rejectNone is a base RoundTripper that answers every request with a 200.
type rejectNone struct{}

func (rejectNone) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// offsets returns the times ts since start.
func offsets(start time.Time, ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(start)
	}
	return out
}
