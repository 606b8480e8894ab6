package fakeserver

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Gemini is the dialect of the Gemini API (and of Google APIs in general):
// no rate-limit headers at all, and a 429 RESOURCE_EXHAUSTED whose body
// names the quota (google.rpc.QuotaFailure) and the wait
// (google.rpc.RetryInfo's retryDelay, in seconds with milliseconds, rounded
// up), and no Retry-After.
type Gemini struct {
	// QuotaID is the quotaId of the QuotaFailure. Empty means
	// "GenerateRequestsPerMinutePerProjectPerModel".
	QuotaID string
}

// Header adds nothing.
func (Gemini) Header(http.Header, State) {}

// Reject returns a 429 RESOURCE_EXHAUSTED with RetryInfo and QuotaFailure.
func (d Gemini) Reject(h http.Header, s State) Rejection {
	wait := ceilTo(s.RetryAfter, time.Millisecond)
	body := mustJSON(map[string]any{"error": map[string]any{
		"code":    http.StatusTooManyRequests,
		"message": "You exceeded your current quota, please check your plan and billing details.",
		"status":  "RESOURCE_EXHAUSTED",
		"details": []any{
			map[string]any{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{map[string]any{
				"quotaId":    cmpOr(d.QuotaID, "GenerateRequestsPerMinutePerProjectPerModel"),
				"quotaValue": strconv.Itoa(s.Limit),
			}}},
			map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo",
				"retryDelay": strconv.FormatFloat(wait.Seconds(), 'f', -1, 64) + "s"},
		},
	}})
	return jsonRejection(h, http.StatusTooManyRequests, body, wait)
}

// Salesforce is the dialect of the Salesforce REST API: every response
// carries the org's use of its allocation,
//
//	Sforce-Limit-Info: api-usage=18/5000
//
// (Capacity minus Remaining, over Capacity), and a rejection is a 403 with
// the error code REQUEST_LIMIT_EXCEEDED and no Retry-After. Use it with a
// SlidingWindow of 24 hours, as Salesforce's allocation rolls.
type Salesforce struct{}

// Header adds Sforce-Limit-Info.
func (Salesforce) Header(h http.Header, s State) {
	h.Set("Sforce-Limit-Info", "api-usage="+strconv.Itoa(s.Used())+"/"+strconv.Itoa(s.Capacity))
}

// Reject returns Salesforce's 403 REQUEST_LIMIT_EXCEEDED.
func (Salesforce) Reject(h http.Header, s State) Rejection {
	return jsonRejection(h, http.StatusForbidden,
		`[{"message":"TotalRequests Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}]`, 0)
}

// Atlassian is the dialect of Atlassian Cloud (Jira, Confluence):
//
//	X-RateLimit-Limit: 100
//	X-RateLimit-Remaining: 12
//	X-RateLimit-Reset: 2026-03-10T12:01Z
//	X-RateLimit-NearLimit: true
//
// where Reset is when the quota is restored in full, an ISO 8601 time to
// the minute (rounded up) on the server's clock, and NearLimit is sent when
// less than a fifth of it is left. A rejection is a 429 with Retry-After in
// whole seconds and RateLimit-Reason.
type Atlassian struct {
	// Reason is the value of RateLimit-Reason. Empty means
	// "jira-burst-based".
	Reason string
}

// Header adds the X-RateLimit-* headers.
func (Atlassian) Header(h http.Header, s State) {
	reset := s.Now.Add(s.ResetAfter).UTC()
	if r := reset.Truncate(time.Minute); !r.Equal(reset) {
		reset = r.Add(time.Minute)
	}
	h.Set("X-Ratelimit-Limit", strconv.Itoa(s.Capacity))
	h.Set("X-Ratelimit-Remaining", strconv.Itoa(s.Remaining))
	h.Set("X-Ratelimit-Reset", reset.Format("2006-01-02T15:04Z"))
	if s.Remaining*5 < s.Capacity {
		h.Set("X-Ratelimit-Nearlimit", "true")
	}
}

// Reject returns a 429 with Retry-After and RateLimit-Reason.
func (d Atlassian) Reject(h http.Header, s State) Rejection {
	h.Set("Ratelimit-Reason", cmpOr(d.Reason, "jira-burst-based"))
	return RetryAfterSeconds{}.Reject(h, s)
}

// HubSpot is the dialect of the HubSpot API's burst limit:
//
//	X-HubSpot-RateLimit-Max: 100
//	X-HubSpot-RateLimit-Remaining: 97
//	X-HubSpot-RateLimit-Interval-Milliseconds: 10000
//
// where Max is Limit and the interval is Window. A rejection is a 429 with
// a JSON body naming the policy and no Retry-After.
type HubSpot struct{}

// Header adds the X-HubSpot-RateLimit-* headers.
func (HubSpot) Header(h http.Header, s State) {
	h.Set("X-Hubspot-Ratelimit-Max", strconv.Itoa(s.Limit))
	h.Set("X-Hubspot-Ratelimit-Remaining", strconv.Itoa(s.Remaining))
	h.Set("X-Hubspot-Ratelimit-Interval-Milliseconds", strconv.FormatInt(s.Window.Milliseconds(), 10))
}

// Reject returns HubSpot's 429.
func (HubSpot) Reject(h http.Header, s State) Rejection {
	return jsonRejection(h, http.StatusTooManyRequests, fmt.Sprintf(
		`{"status":"error","message":"You have reached your ten_secondly_rolling limit.","errorType":"RATE_LIMIT","policyName":"TEN_SECONDLY_ROLLING","limit":%d}`,
		s.Limit), 0)
}

// AzureOpenAI is the dialect of Azure OpenAI: every response carries the
// requests left,
//
//	X-Ratelimit-Limit-Requests: 60
//	X-Ratelimit-Remaining-Requests: 59
//
// without a reset, and a rejection is a 429 with Retry-After in whole
// seconds and retry-after-ms, both rounded up.
type AzureOpenAI struct{}

// Header adds the X-Ratelimit-*-Requests headers.
func (AzureOpenAI) Header(h http.Header, s State) {
	h.Set("X-Ratelimit-Limit-Requests", strconv.Itoa(s.Capacity))
	h.Set("X-Ratelimit-Remaining-Requests", strconv.Itoa(s.Remaining))
}

// Reject returns a 429 with Retry-After and retry-after-ms.
func (AzureOpenAI) Reject(h http.Header, s State) Rejection {
	ms := ceilTo(s.RetryAfter, time.Millisecond)
	h.Set("Retry-After", strconv.FormatInt(ceilSeconds(s.RetryAfter), 10))
	h.Set("Retry-After-Ms", strconv.FormatInt(ms.Milliseconds(), 10))
	return jsonRejection(h, http.StatusTooManyRequests,
		`{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation have exceeded call rate limit."}}`, ms)
}
