package preset

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mux sends each request to the RoundTripper that pick names: one fake
// server per limit that a provider counts apart.
type mux func(*http.Request) http.RoundTripper

func (m mux) RoundTrip(req *http.Request) (*http.Response, error) { return m(req).RoundTrip(req) }

func newReq(method, url, name, value string) *http.Request {
	req := newGet(url, name, value)
	req.Method = method
	return req
}

// constKey is a fakeserver key that counts every request together.
func constKey(*http.Request) string { return "" }

func TestPresetGitHubWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The primary limit for reads, GitHub's headers on every response;
		// the secondary limit of 500 writes an hour (and 80 a minute,
		// checked on the peak) for writes, which GitHub does not tell of
		// before its 429 with Retry-After.
		reads := fakeserver.New(fakeserver.Config{Algorithm: fakeserver.FixedWindow, Limit: 5000, Window: time.Hour,
			Dialect: fakeserver.GitHub{}, Key: fakeserver.KeyByHeader("Authorization")})
		writes := fakeserver.New(fakeserver.Config{Algorithm: fakeserver.SlidingWindow, Limit: 500, Window: time.Hour,
			Dialect: fakeserver.RetryAfterSeconds{}, Key: fakeserver.KeyByHeader("Authorization")})
		rec := newSendRecorder(mux(func(r *http.Request) http.RoundTripper {
			if isWrite(r) {
				return writes.Transport()
			}
			return reads.Transport()
		}), func(r *http.Request) string { return r.Method })
		tr := headway.New(rec, GitHub())
		sendN(t, tr, 8, 1200, func(i int) *http.Request {
			if i%2 == 0 {
				return newReq(http.MethodPost, fmt.Sprintf("https://api.github.com/repos/o/r/issues/%d/comments", i), "Authorization", "Bearer a")
			}
			return newGet(fmt.Sprintf("https://api.github.com/repos/o/r/issues/%d", i), "Authorization", "Bearer a")
		})
		checkServer(t, reads)
		checkServer(t, writes)
		assert.LessOrEqual(t, writes.PeakRate(time.Minute), 80)
		assert.LessOrEqual(t, writes.PeakRate(time.Hour), 500)
		w := rec.times(http.MethodPost)
		require.Len(t, w, 600)
		checkPace(t, w, headway.Per(500, time.Hour))
		checkSpan(t, w, headway.Per(500, time.Hour))
		checkPace(t, rec.times(http.MethodGet), headway.Per(5000, time.Hour))
	})
}

func TestPresetGitHubSearches(t *testing.T) {
	for name, presets := range map[string][]headway.Option{
		"GitHub": {GitHub()}, "GitHub+GitHubSearch": {GitHub(), GitHubSearch()}, "GitHubSearch": {GitHubSearch()},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Code search: 10 a minute; other searches: 30 a minute.
				resource := func(r *http.Request) string {
					if strings.HasPrefix(r.URL.Path, "/search/code") {
						return "code_search"
					}
					return "search"
				}
				code := fakeserver.New(fakeserver.Config{Algorithm: fakeserver.FixedWindow, Limit: 10, Window: time.Minute,
					Dialect: fakeserver.GitHub{Resource: "code_search"}, Key: fakeserver.KeyByHeader("Authorization")})
				search := fakeserver.New(fakeserver.Config{Algorithm: fakeserver.FixedWindow, Limit: 30, Window: time.Minute,
					Dialect: fakeserver.GitHub{Resource: "search"}, Key: fakeserver.KeyByHeader("Authorization")})
				rec := newSendRecorder(mux(func(r *http.Request) http.RoundTripper {
					if resource(r) == "code_search" {
						return code.Transport()
					}
					return search.Transport()
				}), resource)
				tr := headway.New(rec, presets...)
				sendN(t, tr, 32, 120, func(i int) *http.Request {
					if i%4 == 0 {
						return newGet(fmt.Sprintf("https://api.github.com/search/code?q=%d", i), "Authorization", "Bearer a")
					}
					return newGet(fmt.Sprintf("https://api.github.com/search/issues?q=%d", i), "Authorization", "Bearer a")
				})
				checkServer(t, code)
				checkServer(t, search)
				checkPace(t, rec.times("code_search"), headway.Per(10, time.Minute))
				checkSpan(t, rec.times("code_search"), headway.Per(10, time.Minute))
				checkPace(t, rec.times("search"), headway.Per(30, time.Minute))
			})
		})
	}
}

func TestPresetGitHubInstallationTokens(t *testing.T) {
	key := keyGitHub("")
	get := func(auth string) string {
		return key(newGet("https://api.github.com/repos/o/r", "Authorization", auth))
	}
	assert.Equal(t, get("Bearer ghs_first"), get("token ghs_second"), "installation tokens rotate, the quota stays")
	assert.NotEqual(t, get("Bearer ghp_a"), get("Bearer ghp_b"), "personal tokens have quotas of their own")
	assert.NotEqual(t, get("Bearer ghs_a"), get("Bearer ghp_a"))

	synctest.Test(t, func(t *testing.T) {
		// One installation's quota, spent through tokens that rotate.
		srv := fakeserver.New(fakeserver.Config{Algorithm: fakeserver.FixedWindow, Limit: 5000, Window: time.Hour,
			Dialect: fakeserver.GitHub{}, Key: constKey})
		rec := newSendRecorder(srv.Transport(), byHost)
		tr := headway.New(rec, GitHub())
		sendN(t, tr, 8, 300, func(i int) *http.Request {
			return newGet("https://api.github.com/installation/repositories", "Authorization", fmt.Sprintf("Bearer ghs_%d", i/50))
		})
		checkServer(t, srv)
		checkPace(t, rec.times("api.github.com"), headway.Per(5000, time.Hour))
	})
}

func TestPresetGitHubEnterprise(t *testing.T) {
	p := GitHubEnterprise("github.example.com")
	key := p.Key
	k := func(method, path string) string {
		return key(newReq(method, "https://github.example.com"+path, "Authorization", "Bearer a"))
	}
	assert.True(t, strings.HasSuffix(k("GET", "/api/v3/search/code"), "\x00code_search"))
	assert.True(t, strings.HasSuffix(k("GET", "/api/v3/search/issues"), "\x00search"))
	assert.True(t, strings.HasSuffix(k("POST", "/api/graphql"), "\x00graphql"))
	assert.True(t, strings.HasSuffix(k("POST", "/api/v3/repos/o/r/issues"), "\x00core\x00write"))
	assert.True(t, strings.HasSuffix(k("GET", "/api/v3/repos/o/r"), "\x00core"))

	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{Algorithm: fakeserver.FixedWindow, Limit: 10, Window: time.Minute,
			Dialect: fakeserver.GitHub{Resource: "code_search"}, Key: fakeserver.KeyByHeader("Authorization")})
		rec := newSendRecorder(srv.Transport(), byHost)
		tr := headway.New(rec, p)
		sendN(t, tr, 4, 40, func(i int) *http.Request {
			return newGet(fmt.Sprintf("https://github.example.com/api/v3/search/code?q=%d", i), "Authorization", "Bearer a")
		})
		checkServer(t, srv)
		checkPace(t, rec.times("github.example.com"), headway.Per(10, time.Minute))
	})
}

func TestPresetGemini(t *testing.T) {
	p := Gemini(60, 1_000_000)
	synctest.Test(t, func(t *testing.T) {
		// Per project and model: 60 a minute, a second's worth at once;
		// Gemini's 429 names its delay in the body only.
		model := func(r *http.Request) string { return keyGemini(r) }
		srv := fakeserver.New(fakeserver.Config{Limit: 60, Window: time.Minute, Burst: 1, Dialect: fakeserver.Gemini{}, Key: model})
		rec := newSendRecorder(srv.Transport(), model)
		tr := headway.New(rec, p)
		models := []string{"gemini-2.5-flash", "gemini-2.5-pro"}
		sendN(t, tr, 8, 240, func(i int) *http.Request {
			url := fmt.Sprintf("https://generativelanguage.googleapis.com/v1beta/models/%s:generateContent", models[i%2])
			return newReq(http.MethodPost, url, "X-Goog-Api-Key", "k")
		})
		checkServer(t, srv)
		for _, m := range models {
			times := rec.times("generativelanguage.googleapis.com\x00k\x00" + m)
			require.Len(t, times, 120, m)
			checkPace(t, times, p.Limits[0])
			checkSpan(t, times, p.Limits[0])
		}
	})
	assert.Equal(t, "h\x00q\x00m", keyGemini(newGet("https://h/v1/models/m:streamGenerateContent?key=q", "", "")))
}

func TestPresetAzureOpenAI(t *testing.T) {
	p := AzureOpenAI("*.openai.azure.com", 100_000) // 600 requests a minute
	require.Equal(t, 600, p.Limits[0].Count)
	synctest.Test(t, func(t *testing.T) {
		// Per resource and deployment: 10 a second, evaluated over a second.
		srv := fakeserver.New(fakeserver.Config{Limit: 600, Window: time.Minute, Burst: 10,
			Dialect: fakeserver.AzureOpenAI{}, Key: keyAzureOpenAI})
		rec := newSendRecorder(srv.Transport(), keyAzureOpenAI)
		tr := headway.New(rec, p)
		sendN(t, tr, 8, 1200, func(i int) *http.Request {
			url := fmt.Sprintf("https://contoso.openai.azure.com/openai/deployments/d%d/chat/completions?api-version=2024-10-21", i%2)
			if i%4 >= 2 {
				url = strings.Replace(url, "contoso", "fabrikam", 1)
			}
			return newReq(http.MethodPost, url, "Api-Key", "k")
		})
		checkServer(t, srv)
		for _, res := range []string{"contoso", "fabrikam"} {
			for _, d := range []string{"d0", "d1"} {
				times := rec.times(res + ".openai.azure.com\x00k\x00" + d)
				require.Len(t, times, 300)
				checkPace(t, times, p.Limits[0])
				checkSpan(t, times, p.Limits[0])
			}
		}
	})
}

func TestPresetHubSpot(t *testing.T) {
	p := HubSpot(100, 0)
	synctest.Test(t, func(t *testing.T) {
		// 100 per rolling 10 s per account; CRM search 5 a second.
		search := fakeserver.New(fakeserver.Config{Algorithm: fakeserver.SlidingWindow, Limit: 5, Window: time.Second,
			Dialect: fakeserver.HubSpot{}, Key: constKey})
		all := fakeserver.New(fakeserver.Config{Algorithm: fakeserver.SlidingWindow, Limit: 100, Window: 10 * time.Second,
			Dialect: fakeserver.HubSpot{}, Key: constKey})
		rec := newSendRecorder(mux(func(r *http.Request) http.RoundTripper {
			if isHubSpotSearch(r) {
				return search.Transport()
			}
			return all.Transport()
		}), func(r *http.Request) string { return fmt.Sprint(isHubSpotSearch(r)) })
		tr := headway.New(rec, p)
		sendN(t, tr, 32, 600, func(i int) *http.Request {
			if i%3 == 0 {
				return newReq(http.MethodPost, "https://api.hubapi.com/crm/v3/objects/contacts/search", "Authorization", "Bearer pat")
			}
			return newGet(fmt.Sprintf("https://api.hubapi.com/crm/v3/objects/contacts/%d", i), "Authorization", "Bearer pat")
		})
		checkServer(t, search)
		checkServer(t, all)
		checkPace(t, rec.times("true"), headway.PerSecond(5))
		checkPace(t, rec.times("false"), p.Limits[0])
		checkSpan(t, rec.times("false"), p.Limits[0])
	})
	daily := HubSpot(190, 625_000).Limits
	require.Len(t, daily, 2)
	assert.Equal(t, 138240*time.Microsecond, daily[1].Interval(), "a day spread over 625,000 requests")
}

func TestPresetSalesforce(t *testing.T) {
	p := Salesforce("acme.my.salesforce.com", 15_000) // Developer Edition
	synctest.Test(t, func(t *testing.T) {
		// A rolling 24 hours, told on every response.
		srv := fakeserver.New(fakeserver.Config{Algorithm: fakeserver.SlidingWindow, Limit: 15_000, Window: 24 * time.Hour,
			Dialect: fakeserver.Salesforce{}, Key: constKey})
		rec := newSendRecorder(srv.Transport(), byHost)
		tr := headway.New(rec, p)
		sendN(t, tr, 8, 300, func(i int) *http.Request {
			return newGet(fmt.Sprintf("https://acme.my.salesforce.com/services/data/v62.0/sobjects/Account/%d", i), "Authorization", "Bearer 00D")
		})
		checkServer(t, srv)
		checkPace(t, rec.times("acme.my.salesforce.com"), p.Limits[0])
		checkSpan(t, rec.times("acme.my.salesforce.com"), p.Limits[0])
	})
}

func TestPresetCloudflare(t *testing.T) {
	p := Cloudflare()
	synctest.Test(t, func(t *testing.T) {
		// 1,200 in any 5 minutes per user, a 429 with Retry-After past it
		// (the strictest reading of Cloudflare's "per five minute period").
		srv := fakeserver.New(fakeserver.Config{Algorithm: fakeserver.SlidingWindow, Limit: 1200, Window: 5 * time.Minute,
			Dialect: fakeserver.RetryAfterSeconds{}, Key: fakeserver.KeyByHeader("Authorization")})
		rec := newSendRecorder(srv.Transport(), byHost)
		tr := headway.New(rec, p)
		sendN(t, tr, 8, 1500, func(i int) *http.Request {
			return newGet(fmt.Sprintf("https://api.cloudflare.com/client/v4/zones/%d/dns_records", i), "Authorization", "Bearer cf")
		})
		checkServer(t, srv)
		checkPace(t, rec.times("api.cloudflare.com"), p.Limits[0])
		checkSpan(t, rec.times("api.cloudflare.com"), p.Limits[0])
	})
}

func TestPresetJira(t *testing.T) {
	p := Jira("*.atlassian.net")
	assert.Equal(t, "/rest/api/3/issue/{id}/comment", jiraEndpoint("/rest/api/3/issue/ABC-123/comment"))
	assert.Equal(t, "/rest/api/3/issue/{id}", jiraEndpoint("/rest/api/3/issue/10042"))
	assert.Equal(t, "/rest/api/3/search/jql", jiraEndpoint("/rest/api/3/search/jql"))
	synctest.Test(t, func(t *testing.T) {
		// Per site, endpoint and method: a burst limit Atlassian does not
		// publish (here 10 a second, burst 10), told in the headers.
		endpoint := func(r *http.Request) string { return r.URL.Host + " " + r.Method + " " + jiraEndpoint(r.URL.Path) }
		srv := fakeserver.New(fakeserver.Config{Limit: 10, Burst: 10, Dialect: fakeserver.Atlassian{}, Key: endpoint})
		rec := newSendRecorder(srv.Transport(), endpoint)
		tr := headway.New(rec, p)
		sendN(t, tr, 8, 400, func(i int) *http.Request {
			site := []string{"acme", "globex"}[i%2]
			return newGet(fmt.Sprintf("https://%s.atlassian.net/rest/api/3/issue/ABC-%d", site, i), "Authorization", "Basic x")
		})
		st := srv.Stats()
		t.Logf("%+v", st)
		assert.Zero(t, st.Early, "early")
		assert.LessOrEqual(t, st.Rejected, int64(2), "rejected: at most the first burst's, per endpoint")
	})
}

func TestPresetShopifyShops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One preset for every store on the standard plan, one store on
		// Plus with a preset of its own.
		shop := func(r *http.Request) string { return r.URL.Host }
		std := fakeserver.New(fakeserver.Config{Algorithm: fakeserver.LeakyBucket, Limit: 2, Burst: 40, Dialect: fakeserver.Shopify{}, Key: shop})
		plus := fakeserver.New(fakeserver.Config{Algorithm: fakeserver.LeakyBucket, Limit: 20, Burst: 400, Dialect: fakeserver.Shopify{}, Key: shop})
		rec := newSendRecorder(mux(func(r *http.Request) http.RoundTripper {
			if r.URL.Host == "big.myshopify.com" {
				return plus.Transport()
			}
			return std.Transport()
		}), shop)
		tr := headway.New(rec, ShopifyREST("*.myshopify.com", ShopifyStandard), ShopifyREST("big.myshopify.com", ShopifyPlus))
		shops := []string{"a", "b", "big"}
		send := func(shops []string, n int) {
			sendN(t, tr, 8, n, func(i int) *http.Request {
				return newGet(fmt.Sprintf("https://%s.myshopify.com/admin/api/2025-01/products/%d.json", shops[i%len(shops)], i), "X-Shopify-Access-Token", "shpat")
			})
		}
		send(shops[2:], 300)
		send(shops[:2], 300)
		checkServer(t, std)
		checkServer(t, plus)
		for _, s := range shops[:2] {
			checkPace(t, rec.times(s+".myshopify.com"), headway.PerSecond(2).WithBurst(40))
		}
		big := rec.times("big.myshopify.com")
		checkPace(t, big, headway.PerSecond(20).WithBurst(400))
		assert.Less(t, big[len(big)-1].Sub(big[0]), time.Second, "the Plus store is not held to the standard plan")
	})
}
