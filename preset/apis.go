package preset

import (
	"net/http"
	"strings"
	"time"

	"github.com/headway-go/headway"
)

// Gemini returns the Preset of the Gemini API
// (generativelanguage.googleapis.com) for the limits of your project's
// tier and a model, one key per API key (X-Goog-Api-Key, the key query
// parameter, else Authorization) and per model (the path's
// models/{model}): rpm requests a minute and tpm input tokens a minute.
// Find them at aistudio.google.com (your project's rate limits); in mid
// 2025 Gemini 2.5 Flash allowed 10 RPM and 250,000 TPM on the free tier,
// 1,000 RPM and 1,000,000 TPM on Tier 1.
//
// The token limit is spent by a request's cost: set it with [headway.WithCost] to
// the request's input tokens. Without it a request costs 1 token, and only
// the request limit paces. Requests come in bursts of a second's worth
// (rpm/60, at least 1). Limits are per project and model: keys of one
// project share them. The daily request limit (RPD, reset at midnight
// Pacific time) is not paced: spread over the day it would hold a short
// job to a request every few minutes. Its 429, like every Gemini 429,
// names its quota and a retryDelay in the body, which pauses the key. The
// figures panic in New if not positive.
//
// Source: ai.google.dev/gemini-api/docs/rate-limits, as published in 2025.
func Gemini(rpm, tpm int) headway.Preset {
	return headway.Preset{
		Name: "gemini",
		Host: "generativelanguage.googleapis.com",
		Limits: []headway.Limit{
			requestsPerMinute(rpm),
			headway.Per(tpm, time.Minute).WithBurst(tpm),
		},
		Key: keyGemini,
	}
}

// keyGemini keys Gemini's requests by API key and model.
func keyGemini(req *http.Request) string {
	key := req.Header.Get("X-Goog-Api-Key")
	if key == "" {
		key = req.URL.Query().Get("key")
	}
	if key == "" {
		key = req.Header.Get("Authorization")
	}
	model := ""
	if _, rest, ok := strings.Cut(req.URL.Path, "/models/"); ok {
		model, _, _ = strings.Cut(rest, ":")
		model, _, _ = strings.Cut(model, "/")
	}
	return req.URL.Host + "\x00" + key + "\x00" + model
}

// AzureOpenAI returns the Preset of an Azure OpenAI resource at host (such
// as "contoso.openai.azure.com", or "*.openai.azure.com" for every resource
// on one Transport), one key per resource, API key (Api-Key, else
// Authorization) and deployment (the path's deployments/{name}): tpm
// tokens a minute, the quota given to the deployment, and the requests a
// minute Azure grants with it, 6 for every 1,000 tokens (at least 1).
//
// Azure evaluates these over short spans (1 or 10 s), so requests come in
// bursts of a second's worth (rpm/60, at least 1) and tokens in bursts of
// ten seconds' worth (tpm/6): a request may cost up to tpm/6 tokens; more
// fails with [headway.ErrCostTooLarge]. Set a request's cost with [headway.WithCost] to what
// Azure counts when it arrives: the larger of its max_tokens and its
// estimate of the prompt's tokens. Some models grant requests in another
// ratio: copy the Preset and change Limits. Azure's 429s carry
// Retry-After and retry-after-ms. Requests of the v1 API, which names the
// deployment in the body, share one key per resource and API key.
// AzureOpenAI panics in New if tpm is not positive.
//
// Source: learn.microsoft.com/azure/ai-foundry/openai/quotas-limits and
// "Manage Azure OpenAI Service quota", as published in 2025.
func AzureOpenAI(host string, tpm int) headway.Preset {
	rpm := tpm * 6 / 1000
	if tpm > 0 {
		rpm = max(rpm, 1)
	}
	return headway.Preset{
		Name: "azure-openai",
		Host: host,
		Limits: []headway.Limit{
			requestsPerMinute(rpm),
			headway.Per(tpm, time.Minute).WithBurst(tpm / 6),
		},
		Key: keyAzureOpenAI,
	}
}

// keyAzureOpenAI keys Azure OpenAI's requests by resource, API key and
// deployment.
func keyAzureOpenAI(req *http.Request) string {
	key := req.Header.Get("Api-Key")
	if key == "" {
		key = req.Header.Get("Authorization")
	}
	deployment := ""
	if _, rest, ok := strings.Cut(req.URL.Path, "/deployments/"); ok {
		deployment, _, _ = strings.Cut(rest, "/")
	}
	return req.URL.Host + "\x00" + key + "\x00" + deployment
}

// HubSpot returns the Preset of the HubSpot API (api.hubapi.com), one key
// per access token (Authorization): per10s requests per 10 seconds, evenly
// spaced, and perDay a day, evenly spaced too, 0 for none. CRM search
// (paths ending in /search) allows 5 requests a second per account and has
// a key of its own. HubSpot publishes, per account:
//
//   - private apps, Free and Starter: 100 per 10 s, 250,000 a day;
//   - private apps, Professional: 190 per 10 s, 625,000 a day;
//   - private apps, Enterprise: 190 per 10 s, 1,000,000 a day;
//   - the API limit increase raises the 10 s figure to 250 and adds
//     1,000,000 a day;
//   - public (OAuth) apps: 110 per 10 s for each account installing them.
//
// The daily limit resets at midnight in the account's time zone, a fixed
// window that pacing can only honour evenly: with a daily figure, a
// private app on a Free account sends about 3 requests a second at most.
// A program that never comes near the day's quota is faster with perDay
// 0; HubSpot's X-HubSpot-RateLimit-Daily-Remaining, where sent, still
// holds it. HubSpot panics in New if per10s is not positive.
//
// Source: developers.hubspot.com/docs/guides/apps/api-usage/usage-details,
// as published in 2025.
func HubSpot(per10s, perDay int) headway.Preset {
	limits := []headway.Limit{headway.Per(per10s, 10*time.Second)}
	if perDay > 0 {
		limits = append(limits, headway.Per(perDay, 24*time.Hour))
	}
	return headway.Preset{
		Name:   "hubspot",
		Host:   "api.hubapi.com",
		Limits: limits,
		Key: func(req *http.Request) string {
			k := req.URL.Host + "\x00" + req.Header.Get("Authorization")
			if isHubSpotSearch(req) {
				k += "\x00search"
			}
			return k
		},
		Routes: []headway.Route{{Match: isHubSpotSearch, Limits: append([]headway.Limit{headway.PerSecond(5)}, limits...)}},
	}
}

func isHubSpotSearch(req *http.Request) bool { return strings.HasSuffix(req.URL.Path, "/search") }

// Salesforce returns the Preset of a Salesforce org's APIs at host (its
// My Domain, such as "acme.my.salesforce.com"), one key per access token
// (Authorization): perDay requests in any 24 hours, the org's allocation,
// evenly spaced. Salesforce counts a rolling 24 hours: an even pace is
// never refused, however long the job. The allocation depends on the
// edition and the licences: Enterprise and Unlimited Editions get 100,000
// plus 1,000 per Salesforce licence (5,000 per Unlimited licence);
// Developer Edition 15,000. Find yours in Setup, "Company Information",
// or in the Sforce-Limit-Info header (api-usage=18/5000), which the
// Transport reads from every response: requests of other programs of the
// org are accounted for. The allocation is per org, not per token: tokens
// of one org share it.
//
// Salesforce also allows at most 25 long-running requests (20 s or more)
// at once in a production org (5 in a Developer Edition); a program that
// sends long requests should bound them with [headway.WithMaxInFlight]. Salesforce
// panics in New if perDay is not positive.
//
// Source: developer.salesforce.com, "Salesforce Developer Limits and
// Allocations Quick Reference", API Request Limits and Allocations, as
// published in 2025.
func Salesforce(host string, perDay int) headway.Preset {
	return headway.Preset{
		Name:   "salesforce",
		Host:   host,
		Limits: []headway.Limit{headway.Per(perDay, 24*time.Hour)},
		Key:    headway.KeyByHeader("Authorization"),
	}
}

// Cloudflare returns the Preset of the Cloudflare API (api.cloudflare.com),
// one key per API token (Authorization, else X-Auth-Key for a global API
// key): 1,200 requests in 5 minutes, one every 250 ms. Cloudflare counts
// them per user, across the user's tokens and the dashboard, and blocks
// every call of the user for five minutes once they are exceeded: a user
// with several tokens on one Transport should key them together (change
// Key). A limit of 200 requests a second per IP address is not reached at
// this pace. Some APIs (GraphQL Analytics, Workers KV writes) have limits
// of their own, not paced here.
//
// Source: developers.cloudflare.com/fundamentals/api/reference/limits, as
// published in 2025.
func Cloudflare() headway.Preset {
	return headway.Preset{
		Name:   "cloudflare",
		Host:   "api.cloudflare.com",
		Limits: []headway.Limit{headway.Per(1200, 5*time.Minute)},
		Key:    keyByToken("Authorization", "X-Auth-Key"),
	}
}

// Jira returns the Preset of a Jira Cloud site's REST API at host (such as
// "acme.atlassian.net", or "*.atlassian.net" for every site on one
// Transport), one key per token (Authorization), method and endpoint (the
// path, its IDs and issue keys replaced by "{id}"): Jira limits requests
// per second for each endpoint and method, per issue for writes to one
// issue, and, for Forge, Connect and OAuth 2.0 apps since 2026-03-02, by
// points an hour.
//
// Atlassian does not publish fixed figures for the traffic of API tokens,
// so the preset sets no limit: each endpoint sends one request and paces
// to what the answers say (X-RateLimit-*, Beta-RateLimit and
// Beta-RateLimit-Policy, Retry-After). A per-issue write limit
// (RateLimit-Reason: jira-per-issue-on-write) retries that request after
// its Retry-After without slowing the endpoint. Confluence Cloud is
// served from the same host under /wiki and is keyed the same way.
//
// Source: developer.atlassian.com/cloud/jira/platform/rate-limiting and
// "Build an app that respects rate limits", as published in 2026.
func Jira(host string) headway.Preset {
	return headway.Preset{
		Name: "jira",
		Host: host,
		Key: func(req *http.Request) string {
			return req.URL.Host + "\x00" + req.Header.Get("Authorization") + "\x00" + req.Method + " " + jiraEndpoint(req.URL.Path)
		},
	}
}

// jiraEndpoint returns the endpoint of a Jira path: its numeric IDs and
// issue keys ("ABC-123") replaced by "{id}", its version ("/rest/api/3")
// kept.
func jiraEndpoint(path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i, s := range segs {
		if (allDigits(s) && (i == 0 || segs[i-1] != "api" && segs[i-1] != "agile")) || isIssueKey(s) {
			segs[i] = "{id}" // but the version after api or agile
		}
	}
	return "/" + strings.Join(segs, "/")
}

// isIssueKey reports whether s looks like a Jira issue key: capitals (and
// digits and underscores after the first), a hyphen, digits.
func isIssueKey(s string) bool {
	project, num, ok := strings.Cut(s, "-")
	if !ok || project == "" || !allDigits(num) || project[0] < 'A' || project[0] > 'Z' {
		return false
	}
	for i := 1; i < len(project); i++ {
		if c := project[i]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
