package ratelimitheader

import (
	"testing"
	"time"
)

func TestVendorShapes(t *testing.T) {
	const s = time.Second
	ok := func(sig Signal) Signal { return sig } // a signal that may be retried: not Permanent
	runCases(t, nil, []signalCase{
		{name: "Twitter/X x-rate-limit-*", status: 429,
			headers: [][2]string{dateNow, {"x-rate-limit-limit", "900"}, {"x-rate-limit-remaining", "0"}, {"x-rate-limit-reset", "1773144300"}},
			want:    ok(Signal{Throttled: true, Wait: 300 * s, HasWait: true, HasRemaining: true, Reset: 300 * s, Limit: 900})},
		{name: "Atlassian RFC 3339 reset", status: 429,
			headers: [][2]string{dateNow, {"Retry-After", "30"}, {"X-RateLimit-Limit", "350"}, {"X-RateLimit-Remaining", "0"},
				{"X-RateLimit-Reset", "2026-03-10T12:00:30Z"}, {"X-RateLimit-NearLimit", "true"}, {"RateLimit-Reason", "jira-quota-global-based"}},
			want: ok(Signal{Throttled: true, Wait: 30 * s, HasWait: true, RetryAfter: true, HasRemaining: true, Reset: 30 * s, Limit: 350})},
		{name: "Stripe 429 without headers", status: 429, headers: [][2]string{dateNow, {"Request-Id", "req_123"}},
			want: ok(Signal{Throttled: true})},
		{name: "Stripe-Should-Retry false", status: 429, headers: [][2]string{{"Stripe-Should-Retry", "false"}},
			want: Signal{Throttled: true, Permanent: true}},
		{name: "Zendesk", status: 200,
			headers: [][2]string{{"X-Rate-Limit", "700"}, {"X-Rate-Limit-Remaining", "699"}, {"ratelimit-limit", "700"}, {"ratelimit-remaining", "699"},
				{"ratelimit-reset", "41"}, {"zendesk-ratelimit-tickets-index", "total=100; remaining=99; resets=41"}},
			want: ok(Signal{Remaining: 99, HasRemaining: true, Reset: 41 * s, Limit: 100})},
		{name: "Auth0 quota buckets: the hour binds", status: 200,
			headers: [][2]string{{"Auth0-Client-Quota-Limit", "b=per_hour;q=10;r=7;t=3540,b=per_day;q=50;r=47;t=43200"}},
			want:    ok(Signal{Remaining: 7, HasRemaining: true, Reset: 3540 * s, Limit: 10, Period: time.Hour})},
		{name: "Auth0 quota buckets folded over lines, keys in any case", status: 429,
			headers: [][2]string{{"auth0-organization-quota-limit", "B=per_day; Q=50; R=0; T=7200"}, {"Auth0-Organization-Quota-Limit", "b=per_hour;q=10;r=3;t=60"}},
			want: ok(Signal{Throttled: true, Wait: 7200 * s, HasWait: true, OverMaxServerWait: true, Remaining: 0, HasRemaining: true,
				Reset: 7200 * s, Limit: 50, Period: 24 * time.Hour})},
		{name: "Auth0 quota bucket malformed says nothing", status: 200,
			headers: [][2]string{{"Auth0-Client-Quota-Limit", "b=per_hour;q=ten;r=-1;t=soon, per_day, ;;=, b=fortnight;r=5"}},
			want:    ok(Signal{Remaining: 5, HasRemaining: true})},
		{name: "a -Quota-Limit that is a plain number says nothing", status: 200,
			headers: [][2]string{{"X-Quota-Limit", "1000"}},
			want:    ok(Signal{})},
		{name: "HubSpot", status: 200,
			headers: [][2]string{{"X-HubSpot-RateLimit-Daily", "250000"}, {"X-HubSpot-RateLimit-Daily-Remaining", "249000"},
				{"X-HubSpot-RateLimit-Interval-Milliseconds", "10000"}, {"X-HubSpot-RateLimit-Max", "100"}, {"X-HubSpot-RateLimit-Remaining", "0"},
				{"X-HubSpot-RateLimit-Secondly", "10"}, {"X-HubSpot-RateLimit-Secondly-Remaining", "5"}},
			want: ok(Signal{HasRemaining: true, Limit: 100, Period: 10 * s})},
		{name: "Kong without RateLimit-*: 3 left of the minute bind more than 57 of the hour", status: 200,
			headers: [][2]string{{"X-RateLimit-Limit-Minute", "10"}, {"X-RateLimit-Remaining-Minute", "3"}, {"X-RateLimit-Limit-Hour", "100"}, {"X-RateLimit-Remaining-Hour", "57"}},
			want:    ok(Signal{Remaining: 3, HasRemaining: true, Limit: 10, Period: time.Minute})},
		{name: "Kong: two descriptions of one window complete each other", status: 200,
			headers: [][2]string{{"X-RateLimit-Limit-Minute", "10"}, {"X-RateLimit-Remaining-Minute", "0"}, {"RateLimit-Limit", "10"}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "25"}},
			want:    ok(Signal{Wait: 25 * s, HasWait: true, HasRemaining: true, Reset: 25 * s, Limit: 10, Period: time.Minute})},
		{name: "OpenAI tokens exhausted on a 200", status: 200,
			headers: [][2]string{{"x-ratelimit-limit-requests", "1000"}, {"x-ratelimit-remaining-requests", "998"}, {"x-ratelimit-reset-requests", "1s"},
				{"x-ratelimit-limit-tokens", "30000"}, {"x-ratelimit-remaining-tokens", "0"}, {"x-ratelimit-reset-tokens", "6m0s"}},
			want: ok(Signal{Wait: 6 * time.Minute, HasWait: true, Remaining: 998, HasRemaining: true, Reset: s, Limit: 1000})},
		{name: "OpenAI negative duration ignored", status: 200,
			headers: [][2]string{{"x-ratelimit-remaining-requests", "0"}, {"x-ratelimit-reset-requests", "-1s"}},
			want:    ok(Signal{HasRemaining: true})},
		{name: "OpenAI 429 rate limit stays retryable", status: 429,
			body: `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`,
			want: ok(Signal{Throttled: true})},
		{name: "OpenAI billing hard limit", status: 429,
			body: `{"error":{"message":"Billing hard limit has been reached","type":"invalid_request_error","code":"billing_hard_limit_reached"}}`,
			want: Signal{Throttled: true, Permanent: true}},
		{name: "insufficient_quota only in a message is still a rate limit", status: 429,
			body: `{"error":{"message":"see \"code\":\"insufficient_quota\" docs","code":"rate_limit_exceeded"}}`,
			want: ok(Signal{Throttled: true})},
		{name: "epoch milliseconds reset", status: 200,
			headers: [][2]string{dateNow, {"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "1773144030000"}},
			want:    ok(Signal{Wait: 30 * s, HasWait: true, HasRemaining: true, Reset: 30 * s})},
		{name: "Anthropic 200", status: 200,
			headers: [][2]string{dateNow, {"anthropic-ratelimit-requests-limit", "50"}, {"anthropic-ratelimit-requests-remaining", "49"},
				{"anthropic-ratelimit-requests-reset", "2026-03-10T12:01:00Z"}, {"anthropic-ratelimit-input-tokens-remaining", "0"},
				{"anthropic-ratelimit-input-tokens-reset", "2026-03-10T12:00:20Z"}},
			want: ok(Signal{Wait: 20 * s, HasWait: true, Remaining: 49, HasRemaining: true, Reset: 60 * s, Limit: 50})},
		{name: "Discord global 429", status: 429,
			headers: [][2]string{{"Retry-After", "2"}, {"X-RateLimit-Global", "true"}, {"X-RateLimit-Scope", "global"}},
			body:    `{"message":"You are being rate limited.","retry_after":1.5,"global":true}`,
			want:    ok(Signal{Throttled: true, Scope: ScopeGlobal, Wait: 1500 * time.Millisecond, HasWait: true, RetryAfter: true})},
		{name: "Discord shared scope is per key", status: 429,
			headers: [][2]string{{"Retry-After", "2"}, {"X-RateLimit-Scope", "shared"}},
			want:    ok(Signal{Throttled: true, Wait: 2 * s, HasWait: true, RetryAfter: true})},
		{name: "truncated body: cut value not used", status: 429,
			headers: [][2]string{{"Retry-After", "65"}}, body: `{"message":"You are being rate limited.","retry_after":64.5`,
			want: ok(Signal{Throttled: true, Wait: 65 * s, HasWait: true, RetryAfter: true})},
		{name: "body retry_after without header (Telegram)", status: 429,
			body: `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 5","parameters":{"retry_after":5}}`,
			want: ok(Signal{Throttled: true, Wait: 5 * s, HasWait: true, RetryAfter: true})},
		{name: "body retry_after as a string ignored", status: 429, body: `{"retry_after":"5"}`,
			want: ok(Signal{Throttled: true})},
		{name: "body retry_in_seconds without header (monday.com)", status: 429,
			body: `{"errors":[{"message":"Complexity budget exhausted","extensions":{"code":"COMPLEXITY_BUDGET_EXHAUSTED","retry_in_seconds":7}}]}`,
			want: ok(Signal{Throttled: true, Wait: 7 * s, HasWait: true, RetryAfter: true})},
		{name: "body retry_in_seconds refines a header it agrees with", status: 429, headers: [][2]string{{"Retry-After", "8"}},
			body: `{"extensions":{"retry_in_seconds":7.5}}`,
			want: ok(Signal{Throttled: true, Wait: 7500 * time.Millisecond, HasWait: true, RetryAfter: true})},
		{name: "body retry_in_seconds longer than the header wins", status: 429, headers: [][2]string{{"Retry-After", "8"}},
			body: `{"extensions":{"retry_in_seconds":60}}`,
			want: ok(Signal{Throttled: true, Wait: 60 * s, HasWait: true, RetryAfter: true})},
		{name: "body retry_in_seconds negative ignored", status: 429, body: `{"retry_in_seconds":-7}`, want: ok(Signal{Throttled: true})},
		{name: "body retry_in_seconds as a string ignored", status: 429, body: `{"retry_in_seconds":"7"}`, want: ok(Signal{Throttled: true})},
		{name: "body retry_in_seconds with an exponent ignored", status: 429, body: `{"retry_in_seconds":1e3}`, want: ok(Signal{Throttled: true})},
		{name: "body retry_in_seconds NaN ignored", status: 429, body: `{"retry_in_seconds":NaN}`, want: ok(Signal{Throttled: true})},
		{name: "body retry_in_seconds cut off ignored", status: 429, body: `{"retry_in_seconds":7`, want: ok(Signal{Throttled: true})},
		{name: "body retry_in_seconds huge saturates", status: 429,
			body: `{"retry_in_seconds":99999999999999999999999}`,
			want: ok(Signal{Throttled: true, Wait: maxDuration, HasWait: true, RetryAfter: true, OverMaxServerWait: true})},
		{name: "body retry_after_ms without header (Matrix)", status: 429,
			body: `{"errcode":"M_LIMIT_EXCEEDED","error":"Too many requests","retry_after_ms":2000}`,
			want: ok(Signal{Throttled: true, Wait: 2 * s, HasWait: true, RetryAfter: true})},
		{name: "body retry_after_ms refines a Retry-After it agrees with (Matrix since v1.10)", status: 429,
			headers: [][2]string{{"Retry-After", "2"}}, body: `{"errcode":"M_LIMIT_EXCEEDED","retry_after_ms":1500}`,
			want: ok(Signal{Throttled: true, Wait: 1500 * time.Millisecond, HasWait: true, RetryAfter: true})},
		{name: "body retry_after_ms far shorter than Retry-After keeps the header", status: 429,
			headers: [][2]string{{"Retry-After", "30"}}, body: `{"retry_after_ms":1500}`,
			want: ok(Signal{Throttled: true, Wait: 30 * s, HasWait: true, RetryAfter: true})},
		{name: "body retry_after_ms as a string ignored", status: 429, body: `{"retry_after_ms":"2000"}`,
			want: ok(Signal{Throttled: true})},
		{name: "body retry_after_ms huge saturates", status: 429, body: `{"retry_after_ms":99999999999999999999999}`,
			want: ok(Signal{Throttled: true, Wait: maxDuration, HasWait: true, RetryAfter: true, OverMaxServerWait: true})},
		{name: "body retry-after in seconds wins over a spent window's reset (Zulip)", status: 429,
			headers: [][2]string{dateNow, {"X-RateLimit-Limit", "200"}, {"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "1773144060"}},
			body:    `{"code":"RATE_LIMIT_HIT","msg":"API usage exceeded rate limit","result":"error","retry-after":2.5}`,
			want: ok(Signal{Throttled: true, Wait: 2500 * time.Millisecond, HasWait: true, RetryAfter: true,
				HasRemaining: true, Reset: time.Minute, Limit: 200})},
		{name: "body retry-after negative ignored", status: 429, body: `{"retry-after":-3}`,
			want: ok(Signal{Throttled: true})},
		{name: "body retry-seconds in seconds by name (Mailgun)", status: 429,
			body: "{\n  \"retry-seconds\": 60,\n}", want: ok(Signal{Throttled: true, Wait: time.Minute, HasWait: true, RetryAfter: true})},
		{name: "body retryAfter in camel case (Salesforce Marketing Cloud)", status: 429,
			body: `{"message":"Rate limit exceeded","errorcode":50100,"retryAfter":5}`,
			want: ok(Signal{Throttled: true, Wait: 5 * s, HasWait: true, RetryAfter: true})},
		{name: "body retryAfterMs in milliseconds by name", status: 429, body: `{"retryAfterMs":2500}`,
			want: ok(Signal{Throttled: true, Wait: 2500 * time.Millisecond, HasWait: true, RetryAfter: true})},
		{name: "body retry_after_seconds in seconds by name", status: 429, body: `{"error":{"retry_after_seconds":12}}`,
			want: ok(Signal{Throttled: true, Wait: 12 * s, HasWait: true, RetryAfter: true})},
		{name: "body retry count is no delay", status: 429, body: `{"retry":3,"retries":2,"retry_count":4,"retryable":true,"retry_in":9}`,
			want: ok(Signal{Throttled: true})},
		{name: "body retry_after inside a string value is not a member", status: 429,
			body: `{"message":"send \"retry_after\": 99 next time","retry_after":2}`,
			want: ok(Signal{Throttled: true, Wait: 2 * s, HasWait: true, RetryAfter: true})},
		{name: "body retry_after as an array member string is not a key", status: 429,
			body: `{"fields":["retry_after", 99],"retry_after":3}`,
			want: ok(Signal{Throttled: true, Wait: 3 * s, HasWait: true, RetryAfter: true})},
		{name: "body first of a kind counts", status: 429, body: `{"retry_after":4,"Retry-After":90}`,
			want: ok(Signal{Throttled: true, Wait: 4 * s, HasWait: true, RetryAfter: true})},
		{name: "body retry_after_ms on a 200 says nothing", status: 200, headers: [][2]string{{"X-RateLimit-Remaining", "5"}},
			body: `{"retry_after_ms":7000}`,
			want: ok(Signal{Remaining: 5, HasRemaining: true})},
		{name: "body retry_in_seconds on a 200 says nothing", status: 200, headers: [][2]string{{"X-RateLimit-Remaining", "5"}},
			body: `{"retry_in_seconds":7}`,
			want: ok(Signal{Remaining: 5, HasRemaining: true})},
		{name: "GitHub secondary limit without retry-after waits a minute", status: 403,
			headers: [][2]string{{"X-RateLimit-Remaining", "4000"}},
			body:    `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`,
			want:    ok(Signal{Throttled: true, Wait: time.Minute, HasWait: true, RetryAfter: true, Remaining: 4000, HasRemaining: true})},
		{name: "GitHub 403 permission error", status: 403, body: `{"message":"Must have admin rights to Repository."}`,
			want: ok(Signal{})},
		{name: "Shopify over capacity", status: 429, headers: [][2]string{{"X-Shopify-Shop-Api-Call-Limit", "41/40"}},
			want: ok(Signal{Throttled: true, HasRemaining: true, Limit: 40})},
		{name: "Shopify garbage", status: 200, headers: [][2]string{{"X-Shopify-Shop-Api-Call-Limit", "lots"}},
			want: ok(Signal{})},
		{name: "Reddit fractional remaining floored", status: 200, headers: [][2]string{{"X-Ratelimit-Remaining", "599.7"}, {"X-Ratelimit-Reset", "42"}},
			want: ok(Signal{Remaining: 599, HasRemaining: true, Reset: 42 * s})},
		{name: "lower-case keys", status: 200, headers: [][2]string{{"x-ratelimit-remaining", "7"}, {"X-RATELIMIT-RESET", "9"}},
			want: ok(Signal{Remaining: 7, HasRemaining: true, Reset: 9 * s})},
		{name: "huge remaining saturates", status: 200, headers: [][2]string{{"X-Ratelimit-Remaining", "99999999999999999999999"}},
			want: ok(Signal{Remaining: 1<<63 - 1, HasRemaining: true})},
		{name: "cached vendor response says nothing", status: 200, headers: [][2]string{{"Age", "30"}, {"X-Ratelimit-Remaining", "0"}, {"X-Ratelimit-Reset", "30"}},
			want: ok(Signal{})},
		{name: "a vendor's name before Rate-Limit, lower case", status: 200,
			headers: [][2]string{{"x-sentry-rate-limit-limit", "40"}, {"x-sentry-rate-limit-remaining", "39"}, {"x-sentry-rate-limit-concurrentremaining", "0"}},
			want:    ok(Signal{Remaining: 39, HasRemaining: true, Limit: 40})},
		{name: "a vendor's name before Ratelimit", status: 200, headers: [][2]string{{"X-Sib-Ratelimit-Remaining", "10"}, {"X-Sib-Ratelimit-Reset", "12"}},
			want: ok(Signal{Remaining: 10, HasRemaining: true, Reset: 12 * s})},
		{name: "no vendor's name: not the family", status: 200, headers: [][2]string{{"X--Ratelimit-Remaining", "0"}, {"X-Foo-Ratelimited", "0"}},
			want: ok(Signal{})},
		{name: "an early draft's policy in X-RateLimit-Limit gives the window", status: 200,
			headers: [][2]string{{"X-Ratelimit-Limit", "20, 20;w=60"}, {"X-Ratelimit-Remaining", "19"}, {"X-Ratelimit-Reset", "32"}},
			want:    ok(Signal{Remaining: 19, HasRemaining: true, Reset: 32 * s, Limit: 20, Period: time.Minute})},
		{name: "policies of other sizes give no window", status: 200,
			headers: [][2]string{{"X-Ratelimit-Limit", "20, 1000;w=3600"}, {"X-Ratelimit-Remaining", "19"}},
			want:    ok(Signal{Remaining: 19, HasRemaining: true, Limit: 20})},
		{name: "X-RateLimit-Retry-After on a 200 waits for nothing", status: 200,
			headers: [][2]string{{"X-Ratelimit-Remaining", "3"}, {"X-Ratelimit-Retry-After", "30"}},
			want:    ok(Signal{Remaining: 3, HasRemaining: true})},
		{name: "X-RateLimit-Retry-After makes a 403 a throttle", status: 403,
			headers: [][2]string{{"X-Ratelimit-Retry-After", "2.5"}},
			want:    ok(Signal{Throttled: true, Wait: 2500 * time.Millisecond, HasWait: true, RetryAfter: true})},
		{name: "X-RateLimit-Retry-After malformed", status: 429,
			headers: [][2]string{{"X-Ratelimit-Retry-After", "-3"}},
			want:    ok(Signal{Throttled: true})},
		{name: "X-RateLimit-Next, an instant, on a 429", status: 429,
			headers: [][2]string{dateNow, {"X-Ratelimit-Limit", "100"}, {"X-Ratelimit-Remaining", "0"}, {"X-Ratelimit-Next", "2026-03-10T12:00:04.5Z"}},
			want:    ok(Signal{Throttled: true, Wait: 4500 * time.Millisecond, HasWait: true, RetryAfter: true, HasRemaining: true, Limit: 100})},
		{name: "X-RateLimit-Next on a 200 waits for nothing", status: 200,
			headers: [][2]string{dateNow, {"X-Ratelimit-Remaining", "7"}, {"X-Ratelimit-Next", "2026-03-10T12:00:00Z"}},
			want:    ok(Signal{Remaining: 7, HasRemaining: true})},
		{name: "an RFC 3339 reset with a space for the T", status: 429,
			headers: [][2]string{dateNow, {"X-Ratelimit-Remaining", "0"}, {"X-Ratelimit-Reset", "2026-03-10 12:00:30Z"}},
			want:    ok(Signal{Throttled: true, Wait: 30 * s, HasWait: true, HasRemaining: true, Reset: 30 * s})},
		{name: "an ISO 8601 reset with an offset without a colon", status: 429,
			headers: [][2]string{dateNow, {"X-Ratelimit-Remaining", "0"}, {"X-Ratelimit-Reset", "2026-03-10T13:00:30+0100"}},
			want:    ok(Signal{Throttled: true, Wait: 30 * s, HasWait: true, HasRemaining: true, Reset: 30 * s})},
		{name: "an RFC 1123 reset with a numeric zone", status: 429,
			headers: [][2]string{dateNow, {"X-Ratelimit-Remaining", "0"}, {"X-Ratelimit-Reset", "Tue, 10 Mar 2026 12:00:30 +0000"}},
			want:    ok(Signal{Throttled: true, Wait: 30 * s, HasWait: true, HasRemaining: true, Reset: 30 * s})},
		{name: "Trello: a 429 that names its limit only in the body", status: 429,
			headers: [][2]string{dateNow}, body: `{"error":"API_TOKEN_LIMIT_EXCEEDED","message":"Rate limit exceeded"}`,
			want: ok(Signal{Throttled: true})},
		{name: "Trello: the API key's limit", status: 429,
			headers: [][2]string{dateNow}, body: `{"error":"API_KEY_LIMIT_EXCEEDED","message":"Rate limit exceeded"}`,
			want: ok(Signal{Throttled: true})},
		{name: "Trello: the members route's limit", status: 429,
			body: `{"message":"Exceeded rate limit to /1/member","error":"RATE_LIMIT_EXCEEDED"}`,
			want: ok(Signal{Throttled: true})},
		{name: "a body-only 429 that names a delay waits it", status: 429,
			body: `{"error":"API_TOKEN_LIMIT_EXCEEDED","message":"Rate limit exceeded","retry_after":3}`,
			want: ok(Signal{Throttled: true, Wait: 3 * s, HasWait: true, RetryAfter: true})},
		{name: "Trello's code on another status is not guessed a limit", status: 400,
			body: `{"error":"API_TOKEN_LIMIT_EXCEEDED","message":"Rate limit exceeded"}`,
			want: Signal{}},
		{name: "a reset without a zone, within the hour no other zone fits: UTC", status: 429,
			headers: [][2]string{dateNow, {"X-Ratelimit-Remaining", "0"}, {"X-Ratelimit-Reset", "2026-03-10 12:00:30"}},
			want:    ok(Signal{Throttled: true, Wait: 30 * s, HasWait: true, HasRemaining: true, Reset: 30 * s})},
		{name: "a reset without a zone an hour off is no instant", status: 429,
			headers: [][2]string{dateNow, {"X-Ratelimit-Remaining", "0"}, {"X-Ratelimit-Reset", "2026-03-10 13:00:30"}},
			want:    ok(Signal{Throttled: true, HasRemaining: true})},
		{name: "a bucket that states its refill (Atlassian Data Center)", status: 200,
			headers: [][2]string{{"X-Ratelimit-Limit", "100"}, {"X-Ratelimit-Remaining", "97"}, {"X-Ratelimit-Fillrate", "10"}, {"X-Ratelimit-Interval-Seconds", "2"}},
			want:    ok(Signal{Remaining: 97, HasRemaining: true, Limit: 10, Period: 2 * s})},
		{name: "a refill without its interval is no refill", status: 200,
			headers: [][2]string{{"X-Ratelimit-Limit", "100"}, {"X-Ratelimit-Remaining", "97"}, {"X-Ratelimit-Fillrate", "10"}},
			want:    ok(Signal{Remaining: 97, HasRemaining: true, Limit: 100})},
		{name: "a refill of nothing is no refill", status: 200,
			headers: [][2]string{{"X-Ratelimit-Limit", "100"}, {"X-Ratelimit-Remaining", "97"}, {"X-Ratelimit-Fillrate", "0"}, {"X-Ratelimit-Interval-Seconds", "1"}},
			want:    ok(Signal{Remaining: 97, HasRemaining: true, Limit: 100})},
		{name: "a JavaScript date without its zone's name", status: 429,
			headers: [][2]string{dateNow, {"X-Ratelimit-Remaining", "0"}, {"X-Ratelimit-Reset", "Tue Mar 10 2026 08:00:05 GMT-0400"}},
			want:    ok(Signal{Throttled: true, Wait: 5 * s, HasWait: true, HasRemaining: true, Reset: 5 * s})},
		{name: "a JavaScript date cut short is no reset", status: 429,
			headers: [][2]string{dateNow, {"X-Ratelimit-Remaining", "0"}, {"X-Ratelimit-Reset", "Tue Mar 10 2026 08:00:05 GMT (EDT)"}},
			want:    ok(Signal{Throttled: true, HasRemaining: true})},
	})
}

// X-Rate-Limit-<scope>-{Max,Limit,Remaining,Interval-Ms,Interval,Reset}:
// each scope is a window of its own, and the kind names a unit other than
// requests only when one of its words does. Before, Trello's Api-Token was
// taken for such a unit, Max and Interval-Ms were not read, and nothing of
// its headers reached the signal.
func TestXRateLimitScopes(t *testing.T) {
	const s = time.Second
	trello := func(token, key string) [][2]string {
		return [][2]string{
			{"x-rate-limit-api-token-interval-ms", "10000"}, {"x-rate-limit-api-token-max", "100"}, {"x-rate-limit-api-token-remaining", token},
			{"x-rate-limit-api-key-interval-ms", "10000"}, {"x-rate-limit-api-key-max", "300"}, {"x-rate-limit-api-key-remaining", key},
		}
	}
	runCases(t, nil, []signalCase{
		{name: "Trello: the token's window binds", status: 200, headers: trello("99", "299"),
			want: Signal{Remaining: 99, HasRemaining: true, Limit: 100, Period: 10 * s}},
		{name: "Trello: the key's window, spent by other tokens, binds", status: 200, headers: trello("80", "4"),
			want: Signal{Remaining: 4, HasRemaining: true, Limit: 300, Period: 10 * s}},
		{name: "Trello: of the token's, the key's and the members route's windows, the fewest left binds", status: 200,
			headers: append(trello("20", "250"), [][2]string{{"x-rate-limit-member-interval-ms", "900000"},
				{"x-rate-limit-member-max", "100"}, {"x-rate-limit-member-remaining", "60"}}...),
			want: Signal{Remaining: 20, HasRemaining: true, Limit: 100, Period: 10 * s}},
		{name: "Trello: a spent token window names no wait", status: 429, headers: trello("0", "180"),
			want: Signal{Throttled: true, HasRemaining: true, Limit: 100, Period: 10 * s}},
		{name: "Azure: a scope after the field", status: 200,
			headers: [][2]string{{"x-ms-ratelimit-remaining-subscription-reads", "11999"}, {"x-ms-ratelimit-remaining-tenant-reads", "11990"}},
			want:    Signal{Remaining: 11990, HasRemaining: true}},
		{name: "HighLevel: Max over Interval-Milliseconds, and a Daily kind", status: 200,
			headers: [][2]string{{"X-RateLimit-Limit-Daily", "200000"}, {"X-RateLimit-Daily-Remaining", "1000"},
				{"X-RateLimit-Interval-Milliseconds", "10000"}, {"X-RateLimit-Max", "100"}, {"X-RateLimit-Remaining", "95"}},
			want: Signal{Remaining: 95, HasRemaining: true, Limit: 100, Period: 10 * time.Second}},
		{name: "Datadog: X-RateLimit-Period", status: 200,
			headers: [][2]string{{"X-RateLimit-Limit", "600"}, {"X-RateLimit-Period", "60"}, {"X-RateLimit-Remaining", "598"}, {"X-RateLimit-Reset", "42"}},
			want:    Signal{Remaining: 598, HasRemaining: true, Reset: 42 * s, Limit: 600, Period: time.Minute}},
		{name: "Composio: a bare X-RateLimit and a Window-Size with its unit", status: 200,
			headers: [][2]string{{"X-RateLimit", "20000"}, {"X-RateLimit-Remaining", "19990"}, {"X-RateLimit-Window-Size", "600s"}},
			want:    Signal{Remaining: 19990, HasRemaining: true, Limit: 20000, Period: 10 * time.Minute}},
		{name: "Freshdesk: Total", status: 200,
			headers: [][2]string{{"X-RateLimit-Total", "200"}, {"X-RateLimit-Remaining", "150"}, {"X-RateLimit-Used-CurrentRequest", "3"}},
			want:    Signal{Remaining: 150, HasRemaining: true, Limit: 200}},
		{name: "Kong: a window without a name is its seconds", status: 200,
			headers: [][2]string{{"X-RateLimit-Limit-30", "10"}, {"X-RateLimit-Remaining-30", "9"}},
			want:    Signal{Remaining: 9, HasRemaining: true, Limit: 10, Period: 30 * s}},
		{name: "a stated interval wins over the kind's window", status: 200,
			headers: [][2]string{{"X-RateLimit-Limit-Minute", "10"}, {"X-RateLimit-Remaining-Minute", "9"}, {"X-RateLimit-Interval-Minute", "30s"}},
			want:    Signal{Remaining: 9, HasRemaining: true, Limit: 10, Period: 30 * s}},
		{name: "an Interval without its unit is ambiguous (ImageKit's counts milliseconds)", status: 200,
			headers: [][2]string{{"X-RateLimit-Limit", "100"}, {"X-RateLimit-Remaining", "99"}, {"X-RateLimit-Interval", "1000"}},
			want:    Signal{Remaining: 99, HasRemaining: true, Limit: 100}},
		{name: "a kind's word that names a unit: not requests", status: 200,
			headers: [][2]string{{"X-RateLimit-Remaining-Input-Tokens-Minute", "0"}, {"X-RateLimit-Reset-Input-Tokens-Minute", "5"},
				{"X-RateLimit-Remaining-Api-Token", "7"}},
			want: Signal{Wait: 5 * s, HasWait: true, Remaining: 7, HasRemaining: true}},
		{name: "malformed intervals are no window", status: 200,
			headers: [][2]string{{"X-RateLimit-Limit", "10"}, {"X-RateLimit-Remaining", "9"}, {"X-RateLimit-Interval", "-5"},
				{"X-RateLimit-Period", "0"}, {"X-RateLimit-Window", "1e3"}, {"X-RateLimit-Interval-Ms", "soon"}},
			want: Signal{Remaining: 9, HasRemaining: true, Limit: 10}},
		{name: "a window of centuries is none", status: 200,
			headers: [][2]string{{"X-RateLimit-Remaining", "9"}, {"X-RateLimit-Period", "99999999999999999999"}, {"X-RateLimit-Remaining-99999999999", "1"}},
			want:    Signal{Remaining: 1, HasRemaining: true}},
	})
}

// A vendor's name before RateLimit- needs no X- (Fastly), and Rate-Limit-
// alone is the X- family's prefix (Xendit). Before, neither was read.
func TestVendorPrefixesWithoutX(t *testing.T) {
	const s = time.Second
	runCases(t, nil, []signalCase{
		{name: "Fastly: remaining and an epoch reset", status: 200,
			headers: [][2]string{dateNow, {"Fastly-RateLimit-Remaining", "999"}, {"Fastly-RateLimit-Reset", "1773145800"}},
			want:    Signal{Remaining: 999, HasRemaining: true, Reset: 1800 * s}},
		{name: "Fastly, lower case", status: 429,
			headers: [][2]string{dateNow, {"fastly-ratelimit-remaining", "0"}, {"fastly-ratelimit-reset", "1773144600"}},
			want:    Signal{Throttled: true, Wait: 600 * s, HasWait: true, HasRemaining: true, Reset: 600 * s}},
		{name: "Xendit: Rate-Limit-*, a fractional reset in seconds", status: 200,
			headers: [][2]string{{"Rate-Limit-Limit", "600"}, {"Rate-Limit-Remaining", "583"}, {"Rate-Limit-Reset", "58.37"}},
			want:    Signal{Remaining: 583, HasRemaining: true, Reset: 58370 * time.Millisecond, Limit: 600}},
		{name: "a vendor's field that is no X-RateLimit field says nothing", status: 200,
			headers: [][2]string{{"Docker-Ratelimit-Source", "192.0.2.1"}, {"Content-Range", "bytes 0-9/10"}, {"Accept-Ranges", "bytes"}},
			want:    Signal{}},
		{name: "the vendors with dialects of their own are not read twice", status: 200,
			headers: [][2]string{{"Zendesk-Ratelimit-Remaining", "0"}, {"Beta-Ratelimit-Remaining", "0"}, {"Anthropic-Ratelimit-Remaining", "0"}},
			want:    Signal{}},
	})
}

// X-<Word>RateLimit-<field>: the word is a kind of its own. Before, only
// Strava's X-ReadRateLimit- was read, and as a unit other than requests.
func TestXWordRateLimit(t *testing.T) {
	const s = time.Second
	runCases(t, nil, []signalCase{
		{name: "Cloudinary: X-FeatureRateLimit-*, an HTTP-date reset", status: 200,
			headers: [][2]string{dateNow, {"X-FeatureRateLimit-Limit", "500"}, {"X-FeatureRateLimit-Remaining", "499"},
				{"X-FeatureRateLimit-Reset", "Tue, 10 Mar 2026 13:00:00 GMT"}},
			want: Signal{Remaining: 499, HasRemaining: true, Reset: time.Hour, Limit: 500}},
		{name: "Cloudinary's 420 is no throttle, its spent limit still a wait", status: 420,
			headers: [][2]string{dateNow, {"x-featureratelimit-limit", "500"}, {"x-featureratelimit-remaining", "0"},
				{"x-featureratelimit-reset", "Tue, 10 Mar 2026 12:10:00 GMT"}},
			want: Signal{Wait: 600 * s, HasWait: true, HasRemaining: true, Reset: 600 * s, Limit: 500}},
		{name: "Strava: the read limits next to the overall ones", status: 200,
			headers: [][2]string{dateNow, {"X-RateLimit-Limit", "200,2000"}, {"X-RateLimit-Usage", "10,100"},
				{"X-ReadRateLimit-Limit", "100,1000"}, {"X-ReadRateLimit-Usage", "90,100"}},
			want: Signal{Remaining: 10, HasRemaining: true, Reset: 15 * time.Minute, Limit: 100, Period: 15 * time.Minute}},
		{name: "a word that does not end the segment in RateLimit is none", status: 200,
			headers: [][2]string{{"X-Ratelimitbysize-Remaining-Minute", "0"}, {"X-Featureratelimited-Remaining", "0"}},
			want:    Signal{}},
	})
}

// A vendor's fields are its X-<vendor>-RateLimit-<field>; the bare
// X-<vendor>-RateLimit is its limit, as the bare X-RateLimit is.
func TestVendorRest(t *testing.T) {
	for k, want := range map[string]string{
		"X-Sentry-Rate-Limit-Remaining": "Remaining", "x-sib-ratelimit-reset": "reset", "Fastly-RateLimit-Reset": "Reset",
		"X-Discogs-Ratelimit": "Limit", "x-discogs-ratelimit": "Limit", "X-Discogs-Rate-Limit": "Limit",
		"Fastly-Ratelimit": "", "X-Discogs-Ratelimited": "", "X-Envoy-Ratelimited": "", "X-Discogs-Ratelimit-": "",
		"X-Hubspot-Ratelimit": "", "X-Ratelimit": "", "X-Discogs-Rate": "",
	} {
		if got := vendorRest(k); got != want {
			t.Errorf("vendorRest(%q) = %q, want %q", k, got, want)
		}
	}
	runCases(t, nil, []signalCase{
		{name: "a bare vendor limit completes its remaining", status: 200,
			headers: [][2]string{{"X-Discogs-Ratelimit", "60"}, {"X-Discogs-Ratelimit-Remaining", "59"}},
			want:    Signal{Remaining: 59, HasRemaining: true, Limit: 60}},
		{name: "a bare vendor limit with used: what is left is the difference", status: 200,
			headers: [][2]string{{"x-discogs-ratelimit", "60"}, {"x-discogs-ratelimit-used", "45"}},
			want:    Signal{Remaining: 15, HasRemaining: true, Limit: 60}},
		{name: "a bare vendor limit alone says nothing", status: 200,
			headers: [][2]string{{"X-Discogs-Ratelimit", "60"}}, want: Signal{}},
		{name: "malformed bare limits ignored", status: 200,
			headers: [][2]string{{"X-Discogs-Ratelimit", "-60"}, {"X-Other-Ratelimit", "NaN, 1e3"}, {"X-Discogs-Ratelimit-Remaining", "5"}},
			want:    Signal{Remaining: 5, HasRemaining: true}},
		{name: "a huge bare limit saturates", status: 200,
			headers: [][2]string{{"X-Discogs-Ratelimit", "99999999999999999999999"}, {"X-Discogs-Ratelimit-Remaining", "5"}},
			want:    Signal{Remaining: 5, HasRemaining: true, Limit: 1<<63 - 1}},
	})
}

// A 429 that says nothing of what is left, but names a reset: the window
// it met is spent until then (Contentful).
func TestSilent429Reset(t *testing.T) {
	const s = time.Second
	runCases(t, nil, []signalCase{
		{name: "Contentful", status: 429,
			headers: [][2]string{{"x-contentful-ratelimit-second-limit", "55"}, {"x-contentful-ratelimit-reset", "1"}},
			want:    Signal{Throttled: true, Wait: s, HasWait: true, HasRemaining: true, Reset: s}},
		{name: "a bare reset", status: 429, headers: [][2]string{dateNow, {"X-RateLimit-Reset", "1773144030"}},
			want: Signal{Throttled: true, Wait: 30 * s, HasWait: true, HasRemaining: true, Reset: 30 * s}},
		{name: "Retry-After wins", status: 429, headers: [][2]string{{"Retry-After", "5"}, {"X-RateLimit-Reset", "30"}},
			want: Signal{Throttled: true, Wait: 5 * s, HasWait: true, RetryAfter: true, HasRemaining: true, Reset: 30 * s}},
		{name: "another window states what is left: not this one's reset", status: 429,
			headers: [][2]string{{"X-RateLimit-Reset", "30"}, {"X-RateLimit-Remaining-Hour", "57"}},
			want:    Signal{Throttled: true, Remaining: 57, HasRemaining: true, Period: time.Hour}},
		{name: "the IETF fields state what is left", status: 429,
			headers: [][2]string{{"X-RateLimit-Reset", "30"}, {"RateLimit-Remaining", "3"}},
			want:    Signal{Throttled: true, Remaining: 3, HasRemaining: true}},
		{name: "a 200 says nothing", status: 200, headers: [][2]string{{"X-RateLimit-Reset", "30"}}, want: Signal{}},
		{name: "a 503 says nothing of a window", status: 503, headers: [][2]string{{"X-RateLimit-Reset", "30"}},
			want: Signal{Throttled: true}},
		{name: "a negative reset", status: 429, headers: [][2]string{{"X-RateLimit-Reset", "-30"}}, want: Signal{Throttled: true}},
		{name: "NaN", status: 429, headers: [][2]string{{"X-RateLimit-Reset", "NaN"}}, want: Signal{Throttled: true}},
		{name: "an exponent", status: 429, headers: [][2]string{{"X-RateLimit-Reset", "3e1"}}, want: Signal{Throttled: true}},
		{name: "a reset beyond any clock", status: 429, headers: [][2]string{{"X-RateLimit-Reset", "99999999999999999999999"}},
			want: Signal{Throttled: true}},
		{name: "a reset a day off: over the cap", status: 429, headers: [][2]string{dateNow, {"X-RateLimit-Reset", "1773230400"}},
			want: Signal{Throttled: true, Wait: 24 * time.Hour, HasWait: true, OverMaxServerWait: true, HasRemaining: true, Reset: 24 * time.Hour}},
	})
}

// Windows listed as <limit>:<seconds> pairs with their counts (Riot).
func TestPairWindows(t *testing.T) {
	const s = time.Second
	runCases(t, nil, []signalCase{
		{name: "the fewest left binds", status: 200,
			headers: [][2]string{{"X-App-Rate-Limit", "20:1,100:120"}, {"X-App-Rate-Limit-Count", "19:1,3:120"}},
			want:    Signal{Remaining: 1, HasRemaining: true, Limit: 20, Period: s}},
		{name: "counted past the limit: none left", status: 200,
			headers: [][2]string{{"X-App-Rate-Limit", "20:10"}, {"X-App-Rate-Limit-Count", "25:10"}},
			want:    Signal{Remaining: 0, HasRemaining: true, Limit: 20, Period: 10 * s}},
		{name: "a window without its count is not known", status: 200,
			headers: [][2]string{{"X-App-Rate-Limit", "20:1,100:120"}, {"X-App-Rate-Limit-Count", "3:120"}},
			want:    Signal{Remaining: 97, HasRemaining: true, Limit: 100, Period: 120 * s}},
		{name: "a count sent twice: the larger", status: 200,
			headers: [][2]string{{"X-App-Rate-Limit", "20:10"}, {"X-App-Rate-Limit-Count", "3:10"}, {"X-App-Rate-Limit-Count", "7:10"}},
			want:    Signal{Remaining: 13, HasRemaining: true, Limit: 20, Period: 10 * s}},
		{name: "two vendors' windows of one length stay apart", status: 200,
			headers: [][2]string{{"X-App-Rate-Limit", "500:10"}, {"X-App-Rate-Limit-Count", "10:10"},
				{"X-Method-Rate-Limit", "2000:10"}, {"X-Method-Rate-Limit-Count", "1990:10"}},
			want: Signal{Remaining: 10, HasRemaining: true, Limit: 2000, Period: 10 * s}},
		{name: "counts alone say nothing", status: 200,
			headers: [][2]string{{"X-App-Rate-Limit-Count", "3:10"}}, want: Signal{}},
		{name: "a window of no length", status: 200,
			headers: [][2]string{{"X-App-Rate-Limit", "20:0"}, {"X-App-Rate-Limit-Count", "3:0"}}, want: Signal{}},
	})
}

// One reset for several scopes, and a spent Global scope (LaunchDarkly);
// a JSON window (Trakt).
func TestSharedResetAndJSONWindow(t *testing.T) {
	const s = time.Second
	runCases(t, nil, []signalCase{
		{name: "the route takes the shared reset", status: 200,
			headers: [][2]string{dateNow, {"X-Ratelimit-Route-Remaining", "0"}, {"X-Ratelimit-Reset", "1773144002000"}},
			want:    Signal{Wait: 2 * s, HasWait: true, HasRemaining: true, Reset: 2 * s}},
		{name: "a global scope left over is not global", status: 200,
			headers: [][2]string{dateNow, {"X-Ratelimit-Global-Remaining", "3"}, {"X-Ratelimit-Reset", "1773144002000"}},
			want:    Signal{Remaining: 3, HasRemaining: true, Reset: 2 * s}},
		{name: "a scope's own reset is kept", status: 429,
			headers: [][2]string{dateNow, {"X-Ratelimit-Remaining-Org", "0"}, {"X-Ratelimit-Reset-Org", "1773144005"}, {"X-Ratelimit-Reset", "1773144030"}},
			want:    Signal{Throttled: true, Wait: 5 * s, HasWait: true, HasRemaining: true, Reset: 5 * s}},
		{name: "a JSON window without remaining is none", status: 429,
			headers: [][2]string{{"X-Ratelimit", `{"name":"A","limit":1000,"period":300}`}}, want: Signal{Throttled: true}},
		{name: "a JSON window's malformed members are ignored", status: 200,
			headers: [][2]string{dateNow, {"X-Ratelimit", `{"limit":-1,"remaining":7,"period":"300","until":"soon","name":5}`}},
			want:    Signal{Remaining: 7, HasRemaining: true}},
		{name: "a bare limit that is not JSON is still a limit", status: 200,
			headers: [][2]string{{"X-Ratelimit", "100"}, {"X-Ratelimit-Remaining", "9"}},
			want:    Signal{Remaining: 9, HasRemaining: true, Limit: 100}},
	})
}

// A Remaining beside a limit of pairs is still read.
func TestPairWindowsWithRemaining(t *testing.T) {
	runCases(t, nil, []signalCase{
		{name: "remaining read", status: 200,
			headers: [][2]string{{"X-Ratelimit-Limit", "100:60"}, {"X-Ratelimit-Remaining", "5"}},
			want:    Signal{Remaining: 5, HasRemaining: true}},
	})
}

// A 429's body states its retry_after in seconds (Discord since v8) or in
// milliseconds (PluralKit, Discord before v8); the spent window of the same
// response tells which (see bodyDelay).
func TestBodyDelayUnit(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	spent := func(reset string) [][2]string {
		return [][2]string{dateNow, {"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset-After", reset}}
	}
	with := func(h [][2]string, more ...[2]string) [][2]string {
		return append(append([][2]string(nil), h...), more...)
	}
	spentSignal := func(wait, reset time.Duration) Signal {
		return Signal{Throttled: true, Wait: wait, HasWait: true, RetryAfter: true, HasRemaining: true, Reset: reset}
	}
	runCases(t, nil, []signalCase{
		{name: "a whole number a spent window bounds in milliseconds only: milliseconds", status: 429,
			headers: spent("1"), body: `{"retry_after":19}`, want: spentSignal(19*ms, s)},
		{name: "a whole number within a second of the spent window: seconds", status: 429,
			headers: spent("1"), body: `{"retry_after":2}`, want: spentSignal(2*s, s)},
		{name: "a whole number past the window in milliseconds too: seconds", status: 429,
			headers: spent("2"), body: `{"retry_after":5000}`,
			want: Signal{Throttled: true, Wait: 5000 * s, HasWait: true, RetryAfter: true, OverMaxServerWait: true, HasRemaining: true, Reset: 2 * s}},
		{name: "a decimal counts seconds, whatever the window (Discord since v8)", status: 429,
			headers: spent("1"), body: `{"retry_after":19.0}`, want: spentSignal(19*s, s)},
		{name: "retry_in_seconds says its unit", status: 429,
			headers: spent("1"), body: `{"retry_in_seconds":19}`, want: spentSignal(19*s, s)},
		{name: "no spent window: seconds", status: 429,
			headers: [][2]string{dateNow, {"X-RateLimit-Remaining", "0"}}, body: `{"retry_after":19}`,
			want: Signal{Throttled: true, Wait: 19 * s, HasWait: true, RetryAfter: true, HasRemaining: true}},
		{name: "a window with room left: seconds", status: 429,
			headers: [][2]string{dateNow, {"X-RateLimit-Remaining", "3"}, {"X-RateLimit-Reset-After", "1"}}, body: `{"retry_after":19}`,
			want: Signal{Throttled: true, Wait: 19 * s, HasWait: true, RetryAfter: true, Remaining: 3, HasRemaining: true, Reset: s}},
		{name: "a Retry-After of other seconds is kept, the longer", status: 429,
			headers: with(spent("1"), [2]string{"Retry-After", "30"}), body: `{"retry_after":25}`, want: spentSignal(30*s, s)},
		{name: "a Retry-After of the same number counted milliseconds too (Discord before v8)", status: 429,
			headers: with(spent("7"), [2]string{"Retry-After", "6457"}), body: `{"retry_after":6457,"global":false}`,
			want: spentSignal(6457*ms, 7*s)},
		{name: "Discord's global limit before v8: no window to tell the unit by, seconds", status: 429,
			headers: [][2]string{dateNow, {"Retry-After", "6457"}, {"X-RateLimit-Global", "true"}}, body: `{"retry_after":6457,"global":true}`,
			want: Signal{Throttled: true, Scope: ScopeGlobal, Wait: 6457 * s, HasWait: true, RetryAfter: true, OverMaxServerWait: true}},
		{name: "a body on a 200 says nothing", status: 200, headers: spent("1"), body: `{"retry_after":19}`,
			want: Signal{Wait: s, HasWait: true, HasRemaining: true, Reset: s}},
	})
}
