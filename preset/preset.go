package preset

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/headway-go/headway"
)

// isWrite reports whether req's method changes something: POST, PUT,
// PATCH or DELETE.
func isWrite(req *http.Request) bool {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// keyByToken keys requests by host and the first of the headers names that
// is set: the API token, wherever the provider takes it.
func keyByToken(names ...string) headway.KeyFunc {
	for i, n := range names {
		names[i] = http.CanonicalHeaderKey(n)
	}
	return func(req *http.Request) string {
		for _, n := range names {
			if v := req.Header.Get(n); v != "" {
				return req.URL.Host + "\x00" + v
			}
		}
		return req.URL.Host + "\x00"
	}
}

// GitHub returns the Preset of the GitHub REST API at api.github.com, for
// requests authenticated as a user (a personal access token or an OAuth
// app's token) or as a GitHub App installation, one key per token in the
// Authorization header:
//
//   - 5,000 requests an hour per token, the primary limit, evenly spaced
//     (one request every 720 ms). GitHub counts a fixed hour, which a
//     burst on top of the even pace would overrun at the hour's end: the
//     Transport does not stop at X-RateLimit-Remaining: 0 before the
//     next request leaves, so no burst is given. A short job that could
//     spend the hour's quota at once is slower for it.
//   - The secondary limits on content-creating requests, 80 a minute and
//     500 an hour: POST, PATCH, PUT and DELETE requests (but GraphQL's)
//     have a key of their own per token, paced to both, one every 7.2 s.
//     Reads and writes are paced apart, each within 5,000 an hour; GitHub's
//     X-RateLimit-Remaining, which counts both, holds them to the primary
//     limit together. The other secondary limits (900 points a minute for
//     REST, a GET costing 1 point and a write 5; at most 100 requests in
//     flight) are not reached at these paces; their 403s and 429s pause
//     the key.
//   - Search (paths under /search/) at 30 a minute and code search
//     (/search/code) at 10 a minute, each with a key of its own, as GitHub
//     counts them apart from the primary limit; so has GraphQL (/graphql,
//     paced to the 5,000 an hour, held to its points by GitHub's headers).
//
// A GitHub App's installation access tokens (ghs_...) expire after an
// hour, and the next token spends the same installation's quota: every
// installation token shares one key, so that the pacing and what GitHub's
// headers said survive the rotation. An app that serves several
// installations from one Transport should key them apart (Preset.Key);
// an installation's own limit is 5,000 to 15,000 an hour. Unauthenticated
// requests (60 an hour per IP address) and GitHub Actions' GITHUB_TOKEN
// (1,000 an hour per repository) have lower limits: change Limits. For
// GitHub Enterprise Server, use GitHubEnterprise.
//
// Source: docs.github.com, "Rate limits for the REST API" and "REST API
// endpoints for search", as published in 2025.
func GitHub() headway.Preset {
	return headway.Preset{
		Name:   "github",
		Host:   "api.github.com",
		Limits: []headway.Limit{headway.Per(5000, time.Hour)},
		Key:    keyGitHub(""),
		Routes: githubRoutes(""),
	}
}

// githubRoutes are the limits of GitHub's requests that have quotas of
// their own, for an API whose paths begin with base.
func githubRoutes(base string) []headway.Route {
	graphql := githubGraphQL(base)
	return []headway.Route{
		{Match: func(req *http.Request) bool { return isWrite(req) && !isGitHubQuota(req.URL.Path, base, graphql) },
			Limits: []headway.Limit{headway.Per(80, time.Minute), headway.Per(500, time.Hour)}},
		{PathPrefix: base + "/search/", Limits: []headway.Limit{headway.Per(30, time.Minute)}},
		{PathPrefix: base + "/search/code", Limits: []headway.Limit{headway.Per(10, time.Minute)}},
	}
}

// isGitHubQuota reports whether path spends a quota of its own: search or
// GraphQL.
func isGitHubQuota(path, base, graphql string) bool {
	return strings.HasPrefix(path, base+"/search/") || path == graphql
}

// githubGraphQL returns the path of the GraphQL API beside a REST API at
// base: /graphql, or /api/graphql for /api/v3.
func githubGraphQL(base string) string {
	if base == "" {
		return "/graphql"
	}
	return strings.TrimSuffix(base, "/v3") + "/graphql"
}

// GitHubSearch returns the Preset of GitHub's search API (api.github.com,
// paths under /search/): 30 requests a minute per token, one every 2 s,
// and code search (/search/code) 10 a minute, each with a key of its own;
// keys are those of GitHub. GitHub includes it: GitHubSearch is for a
// Transport that only searches, and changes nothing beside GitHub.
//
// Source: docs.github.com, "Rate limits for the REST API" and "REST API
// endpoints for search", as published in 2025 (authenticated requests; 10 a
// minute without a token).
func GitHubSearch() headway.Preset {
	return headway.Preset{
		Name:       "github-search",
		Host:       "api.github.com",
		PathPrefix: "/search/",
		Limits:     []headway.Limit{headway.Per(30, time.Minute)},
		Key:        keyGitHub(""),
		Routes:     []headway.Route{{PathPrefix: "code", Limits: []headway.Limit{headway.Per(10, time.Minute)}}},
	}
}

// GitHubEnterprise returns the Preset of a GitHub Enterprise Server's REST
// API at host (such as "github.example.com"), paths under /api/v3, and its
// GraphQL API at /api/graphql: keys and limits as GitHub's. A GitHub
// Enterprise Server has rate limits only when its administrator turns them
// on, at figures of the administrator's choosing; this preset assumes
// GitHub.com's, which errs on the side of the limits being on. Change
// Limits to your site's figures. GitHub Enterprise Cloud is api.github.com:
// use GitHub (its installations may send up to 15,000 an hour).
//
// Source: docs.github.com/enterprise-server, "Configuring rate limits", as
// published in 2025.
func GitHubEnterprise(host string) headway.Preset {
	return headway.Preset{
		Name:   "github-enterprise",
		Host:   host,
		Limits: []headway.Limit{headway.Per(5000, time.Hour)},
		Key:    keyGitHub("/api/v3"),
		Routes: githubRoutes("/api/v3"),
	}
}

// keyGitHub keys GitHub's requests, for a REST API whose paths begin with
// base, by token and by the quota (GitHub's "resource") that the request
// spends, writes apart.
func keyGitHub(base string) headway.KeyFunc {
	graphql := githubGraphQL(base)
	return func(req *http.Request) string {
		resource := "core"
		switch p := req.URL.Path; {
		case p == base+"/search/code" || strings.HasPrefix(p, base+"/search/code/"):
			resource = "code_search"
		case strings.HasPrefix(p, base+"/search/"):
			resource = "search"
		case p == graphql:
			resource = "graphql"
		case isWrite(req):
			resource = "core\x00write"
		}
		return req.URL.Host + "\x00" + githubToken(req.Header.Get("Authorization")) + "\x00" + resource
	}
}

// githubToken returns the part of an Authorization header that names the
// quota: the header itself, or "ghs_" for every installation access token
// of a GitHub App, which rotates hourly and spends one installation's
// quota.
func githubToken(auth string) string {
	_, tok, _ := strings.Cut(auth, " ")
	if strings.HasPrefix(strings.TrimSpace(tok), "ghs_") {
		return "ghs_"
	}
	return auth
}

// A ShopifyPlan is a Shopify store's plan, which sets the rate of its
// REST Admin API.
type ShopifyPlan int

// The Shopify plans, for ShopifyREST.
const (
	// ShopifyStandard is the Basic, Shopify and other standard plans.
	ShopifyStandard ShopifyPlan = iota
	// ShopifyAdvanced is the Advanced plan.
	ShopifyAdvanced
	// ShopifyPlus is Shopify Plus.
	ShopifyPlus
)

// ShopifyREST returns the Preset of the Shopify REST Admin API of one
// store, whose host is shop (such as "acme.myshopify.com"), one key per
// store and access token (X-Shopify-Access-Token): Shopify limits each app
// on each store with a leaky bucket, which headway's pacer models exactly.
// An app that serves many stores on one Transport passes
// "*.myshopify.com" for every store (of one plan; a store on another plan
// gets a preset of its own, whose limits win over the pattern's): each
// store still has keys of its own.
//
//   - ShopifyStandard: 2 requests a second, in bursts of 40 (the bucket).
//   - ShopifyAdvanced: 4 a second, in bursts of 40. Shopify doubles the
//     rate; the bucket is given here as the standard one, not being sure
//     it doubles too.
//   - ShopifyPlus: 20 a second, in bursts of 400.
//
// The bucket's level, X-Shopify-Shop-Api-Call-Limit, is read from every
// response, so that other processes of the same app on the same store are
// accounted for. Shopify for enterprise (40 a second) is not among the
// plans: use ShopifyPlus and change Limits. ShopifyREST panics on an
// unknown plan.
//
// Source: shopify.dev/docs/api/usage/rate-limits and
// shopify.dev/docs/api/admin-rest/usage/rate-limits, as published in 2025
// (the REST Admin API is legacy since 2024-10-01). The GraphQL Admin API
// counts query cost instead; it is not covered here.
func ShopifyREST(shop string, plan ShopifyPlan) headway.Preset {
	var l headway.Limit
	switch plan {
	case ShopifyStandard:
		l = headway.PerSecond(2).WithBurst(40)
	case ShopifyAdvanced:
		l = headway.PerSecond(4).WithBurst(40)
	case ShopifyPlus:
		l = headway.PerSecond(20).WithBurst(400)
	default:
		panic(fmt.Sprintf("headway: unknown Shopify plan %d", plan))
	}
	return headway.Preset{
		Name:   "shopify-rest",
		Host:   shop,
		Limits: []headway.Limit{l},
		Key:    headway.KeyByHeader("X-Shopify-Access-Token"),
	}
}

// StripeLive returns the Preset of the Stripe API (api.stripe.com) in live
// mode, one key per secret key (Authorization) and per endpoint: Stripe
// limits each endpoint (an operation, such as POST /v1/payment_intents or
// GET /v1/customers/{id}) to 25 requests a second unless it says
// otherwise, and its account to 100 a second in all. Each endpoint is
// paced to 25 a second, in bursts of 5; Stripe does not publish a burst,
// and 5 is a guess on the safe side.
//
// The account's 100 a second spans endpoints, which headway's keys do
// not: a program that calls more than four endpoints at full speed at
// once can exceed it, and so can several secret keys of one account.
// Stripe's 429 (without a Retry-After) then cuts the key's pace. Some
// endpoints have lower limits (Search: 20 reads a second; Files: 20 reads
// and 20 writes a second; 1,000 updates of one PaymentIntent an hour)
// that are not paced here.
//
// StripeLive and StripeTest apply to the same host: on one Transport the
// later one applies to every request for api.stripe.com.
//
// Source: docs.stripe.com/rate-limits, as published in 2025 (older
// versions gave 100 reads and 100 writes a second in live mode, without a
// limit per endpoint).
func StripeLive() headway.Preset {
	return headway.Preset{
		Name:   "stripe-live",
		Host:   "api.stripe.com",
		Limits: []headway.Limit{headway.PerSecond(25).WithBurst(5)},
		Key:    keyStripeEndpoint,
	}
}

// StripeTest returns the Preset of the Stripe API (api.stripe.com) in test
// mode (a sandbox), one key per secret key (Authorization): 25 requests a
// second in all, in bursts of 5 (a guess; Stripe does not publish one).
// Every endpoint's own limit of 25 a second is then met too. See
// StripeLive.
//
// Source: docs.stripe.com/rate-limits, as published in 2025.
func StripeTest() headway.Preset {
	return headway.Preset{
		Name:   "stripe-test",
		Host:   "api.stripe.com",
		Limits: []headway.Limit{headway.PerSecond(25).WithBurst(5)},
		Key:    headway.KeyByHeader("Authorization"),
	}
}

// keyStripeEndpoint keys Stripe's requests by secret key and endpoint.
func keyStripeEndpoint(req *http.Request) string {
	return req.URL.Host + "\x00" + req.Header.Get("Authorization") + "\x00" + req.Method + " " + stripeEndpoint(req.URL.Path)
}

// stripeEndpoint returns the endpoint of a Stripe API path, its object IDs
// replaced by "{id}". An ID is told from a resource's name by its digits
// or capitals ("cus_NffrFeUfNV2Hib"), which names never have; the version
// ("v1") is kept.
func stripeEndpoint(path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i, s := range segs {
		if i > 0 && strings.ContainsFunc(s, func(r rune) bool {
			return r >= '0' && r <= '9' || r >= 'A' && r <= 'Z'
		}) {
			segs[i] = "{id}"
		}
	}
	return "/" + strings.Join(segs, "/")
}

// Discord returns the Preset of the Discord API (discord.com), one key per
// bot token (Authorization) and per route: Discord limits each route on
// its own, in buckets it tells of in X-RateLimit-* headers and does not
// publish (sending a message is 5 per 5 s per channel, for instance). A
// route is the method and the path, the IDs in it replaced by "{id}" but
// for its major parameter (the channel, guild or webhook, and a webhook's
// token), which Discord limits apart.
//
// Each route is paced to at most 50 requests a second, Discord's global
// limit, and to what its bucket's headers say is left. The global limit is
// per bot token and spans all of its routes, which headway's keys (one per
// route) do not: the figure is not conservative for a bot that calls many
// routes at once. It can exceed it, and then Discord's global 429
// (X-RateLimit-Global) pauses every route of that token (not those of
// other tokens) until it is over; the waits it names teach the token's
// routes the global window, which they then spend together. Discord bans
// an IP address for a while after 10,000 rejected requests (401, 403,
// 429) in 10 minutes.
//
// Source: discord.com/developers/docs/topics/rate-limits, as published in 2025.
func Discord() headway.Preset {
	return headway.Preset{
		Name:   "discord",
		Host:   "discord.com",
		Limits: []headway.Limit{headway.PerSecond(50)},
		Key:    keyDiscord,
	}
}

// keyDiscord keys Discord's requests by token, method and route.
func keyDiscord(req *http.Request) string {
	return req.URL.Host + "\x00" + req.Header.Get("Authorization") + "\x00" + req.Method + " " + discordRoute(req.URL.Path)
}

// discordRoute returns the route of a Discord API path: without /api and
// its version, every ID but the major parameter replaced by "{id}", and a
// reaction's emoji by "{emoji}".
func discordRoute(path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if len(segs) > 0 && segs[0] == "api" {
		segs = segs[1:]
		if len(segs) > 0 && len(segs[0]) > 1 && segs[0][0] == 'v' && allDigits(segs[0][1:]) {
			segs = segs[1:]
		}
	}
	var b strings.Builder
	for i, s := range segs {
		switch {
		case i == 1 && (segs[0] == "channels" || segs[0] == "guilds" || segs[0] == "webhooks"):
			// the major parameter
		case i == 2 && segs[0] == "webhooks":
			// a webhook's token is part of its major parameter
		case i > 0 && segs[i-1] == "reactions":
			s = "{emoji}"
		case allDigits(s):
			s = "{id}"
		}
		b.WriteByte('/')
		b.WriteString(s)
	}
	return b.String()
}

// requestsPerMinute is the request limit of the per-minute APIs (OpenAI,
// Azure OpenAI, Anthropic, Gemini): rpm a minute in bursts of a second's
// worth, at least 1, counting requests whatever their cost.
func requestsPerMinute(rpm int) headway.Limit {
	return headway.Per(rpm, time.Minute).WithBurst(max(rpm/60, 1)).Requests()
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Slack returns the Preset of the Slack Web API (slack.com) for methods of
// rate-limit tier 1 to 4, one key per token (Authorization) and per method
// (the path, such as /api/conversations.history): Slack limits each method
// for each app on each workspace. The tiers allow:
//
//   - Tier 1: 1 request a minute;
//   - Tier 2: 20 a minute;
//   - Tier 3: 50 a minute;
//   - Tier 4: 100 a minute;
//
// evenly spaced. Slack allows "occasional bursts" above these figures
// without saying how large, so none is assumed. Every method is paced to
// the one tier given: give it the lowest tier of the methods the program
// calls, or call methods of other tiers through a Transport of their own.
// chat.postMessage has a special limit (about one message a second per
// channel) that a key per method cannot follow; Slack's 429 with
// Retry-After pauses the key. Slack panics if tier is not 1 to 4.
//
// Source: api.slack.com/apis/rate-limits (docs.slack.dev), as published in 2025.
// Slack has announced lower limits for conversations.history and
// conversations.replies (1 request a minute, as announced and not checked
// since) for commercially distributed apps outside its Marketplace, created
// from 2025-05-29: such an app should use Slack(1) for them.
func Slack(tier int) headway.Preset {
	perMinute := map[int]int{1: 1, 2: 20, 3: 50, 4: 100}[tier]
	if perMinute == 0 {
		panic(fmt.Sprintf("headway: Slack tier %d is not 1 to 4", tier))
	}
	return headway.Preset{
		Name:   fmt.Sprintf("slack-tier%d", tier),
		Host:   "slack.com",
		Limits: []headway.Limit{headway.Per(perMinute, time.Minute)},
		Key: func(req *http.Request) string {
			return req.URL.Host + "\x00" + req.Header.Get("Authorization") + "\x00" + req.URL.Path
		},
	}
}

// OpenAI returns the Preset of the OpenAI API (api.openai.com) for the
// limits of your account's usage tier and model, one key per API key
// (Authorization): rpm requests a minute and tpm tokens a minute. Find
// them at platform.openai.com/settings/organization/limits.
//
// The token limit is spent by a request's cost: set it with [headway.WithCost] to
// what OpenAI counts when the request arrives, the larger of its
// max_tokens (max_completion_tokens) and its estimate of the request's
// tokens (from its length in characters, about four to a token). Without it a
// request costs 1 token, and only the request limit paces. A request may
// cost up to tpm (the token limit's burst, OpenAI's bucket holding a
// minute's tokens); more fails with [headway.ErrCostTooLarge].
//
// Requests come in bursts of a second's worth (rpm/60, at least 1):
// OpenAI may enforce a limit over periods shorter than a minute. Limits
// are per organization, project and model: keys of one project share
// them, and every model on a Transport is paced to the one pair given
// here (give it the model with the lowest, or use a Transport per model).
// OpenAI's x-ratelimit-*-requests and -tokens headers are read. The
// figures panic in New if not positive.
//
// Source: platform.openai.com/docs/guides/rate-limits, as published in 2025.
func OpenAI(rpm, tpm int) headway.Preset {
	return headway.Preset{
		Name: "openai",
		Host: "api.openai.com",
		Limits: []headway.Limit{
			requestsPerMinute(rpm),
			headway.Per(tpm, time.Minute).WithBurst(tpm),
		},
		Key: headway.KeyByHeader("Authorization"),
	}
}

// Anthropic returns the Preset of the Anthropic API (api.anthropic.com)
// for the limits of your organization's tier and model class, one key per
// API key (X-Api-Key, else Authorization): rpm requests a minute and itpm
// input tokens a minute. Find them at console.anthropic.com/settings/limits.
//
// The input-token limit is spent by a request's cost: set it with [headway.WithCost]
// to the request's input tokens (cached tokens read do not count for most
// models). Without it a request costs 1 token. A request may cost up to
// itpm; more fails with [headway.ErrCostTooLarge]. The output-token limit (OTPM) is
// not paced here: a request has one cost, and its output is known only
// once it is done. Anthropic's anthropic-ratelimit-output-tokens-* headers
// are read, and its 429s name a retry-after, so a spent output quota
// pauses the key until it is back.
//
// Anthropic refills its buckets continuously and may enforce a limit over
// periods shorter than a minute (60 RPM as 1 a second), so requests come
// in bursts of a second's worth (rpm/60, at least 1). Limits are per
// organization and model class: keys of one organization share them.
// The figures panic in New if not positive.
//
// Source: docs.anthropic.com/en/api/rate-limits, as published in 2025.
func Anthropic(rpm, itpm int) headway.Preset {
	return headway.Preset{
		Name: "anthropic",
		Host: "api.anthropic.com",
		Limits: []headway.Limit{
			requestsPerMinute(rpm),
			headway.Per(itpm, time.Minute).WithBurst(itpm),
		},
		Key: keyByToken("X-Api-Key", "Authorization"),
	}
}

// Notion returns the Preset of the Notion API (api.notion.com): 3 requests
// a second, evenly spaced, one key per integration token (Authorization).
// Notion allows "some bursts beyond the average" without saying how
// large, so none is assumed; its 429s name a Retry-After. Notion also
// limits the size of requests (payloads, blocks per request), which
// pacing does not cover.
//
// Source: developers.notion.com/reference/request-limits, as published in 2025.
func Notion() headway.Preset {
	return headway.Preset{
		Name:   "notion",
		Host:   "api.notion.com",
		Limits: []headway.Limit{headway.PerSecond(3)},
		Key:    headway.KeyByHeader("Authorization"),
	}
}
