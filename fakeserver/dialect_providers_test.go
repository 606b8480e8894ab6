package fakeserver

import (
	"testing"
	"time"
)

func TestDialectGemini(t *testing.T) {
	runExchanges(t, Config{Limit: 2, Window: time.Minute, Burst: 1, Dialect: Gemini{}}, 0, []exchange{
		{0, 200, h("Retry-After", "", "X-Ratelimit-Remaining", ""), ""},
		{0, 429, h("Retry-After", ""), `"retryDelay":"30s"`},
		{0, 429, nil, `"quotaId":"GenerateRequestsPerMinutePerProjectPerModel","quotaValue":"2"`},
		{30 * time.Second, 200, nil, ""},
	})
}

func TestDialectSalesforce(t *testing.T) {
	runExchanges(t, Config{Algorithm: SlidingWindow, Limit: 2, Window: 24 * time.Hour, Dialect: Salesforce{}}, 0, []exchange{
		{0, 200, h("Sforce-Limit-Info", "api-usage=1/2"), ""},
		{0, 200, h("Sforce-Limit-Info", "api-usage=2/2"), ""},
		{time.Hour, 403, h("Sforce-Limit-Info", "api-usage=2/2", "Retry-After", ""), `"errorCode":"REQUEST_LIMIT_EXCEEDED"`},
		{24 * time.Hour, 200, nil, ""},
	})
}

func TestDialectAtlassian(t *testing.T) {
	runExchanges(t, Config{Algorithm: FixedWindow, Limit: 10, Window: time.Minute, Dialect: Atlassian{}}, 30*time.Second, []exchange{
		{0, 200, h("X-Ratelimit-Limit", "10", "X-Ratelimit-Remaining", "9", "X-Ratelimit-Reset", "2026-03-10T12:01Z", "X-Ratelimit-Nearlimit", ""), ""},
		{0, 200, nil, ""}, {0, 200, nil, ""}, {0, 200, nil, ""}, {0, 200, nil, ""}, {0, 200, nil, ""}, {0, 200, nil, ""},
		{0, 200, h("X-Ratelimit-Remaining", "2", "X-Ratelimit-Nearlimit", ""), ""},
		{0, 200, h("X-Ratelimit-Remaining", "1", "X-Ratelimit-Nearlimit", "true"), ""},
		{0, 200, h("X-Ratelimit-Remaining", "0"), ""},
		{0, 429, h("Retry-After", "30", "Ratelimit-Reason", "jira-burst-based"), ""},
	})
}

func TestDialectHubSpot(t *testing.T) {
	runExchanges(t, Config{Algorithm: SlidingWindow, Limit: 2, Window: 10 * time.Second, Dialect: HubSpot{}}, 0, []exchange{
		{0, 200, h("X-Hubspot-Ratelimit-Max", "2", "X-Hubspot-Ratelimit-Remaining", "1", "X-Hubspot-Ratelimit-Interval-Milliseconds", "10000"), ""},
		{0, 200, h("X-Hubspot-Ratelimit-Remaining", "0"), ""},
		{0, 429, h("Retry-After", ""), `"policyName":"TEN_SECONDLY_ROLLING"`},
	})
}

func TestDialectAzureOpenAI(t *testing.T) {
	runExchanges(t, Config{Limit: 60, Window: time.Minute, Burst: 1, Dialect: AzureOpenAI{}}, 0, []exchange{
		{0, 200, h("X-Ratelimit-Limit-Requests", "1", "X-Ratelimit-Remaining-Requests", "0"), ""},
		{250 * time.Millisecond, 429, h("Retry-After", "1", "Retry-After-Ms", "750"), "exceeded call rate limit"},
		{750 * time.Millisecond, 200, nil, ""},
	})
}

func TestDialectFolded(t *testing.T) {
	d, err := DialectByName("folded-github")
	if err != nil || d != (Folded{Dialect: GitHub{}}) {
		t.Fatalf("DialectByName(folded-github) = %v, %v", d, err)
	}
	if _, err := DialectByName("folded-nope"); err == nil {
		t.Fatal("folded-nope: no error")
	}
	runExchanges(t, Config{Limit: 1, Window: time.Minute, Burst: 1, Dialect: Folded{IETF06{}}}, 0, []exchange{
		{0, 200, h("Ratelimit-Remaining", "0, 0", "Ratelimit-Limit", "1, 1"), ""},
		{0, 429, h("Retry-After", "60, 60", "Content-Type", "application/json"), ""},
	})
	runExchanges(t, Config{Limit: 1, Window: time.Minute, Burst: 1, Dialect: Folded{RetryAfterDate{}}}, 0, []exchange{
		{0, 200, nil, ""},
		{0, 429, h("Retry-After", "Tue, 10 Mar 2026 12:01:00 GMT, Tue, 10 Mar 2026 12:01:00 GMT"), ""},
	})
}
