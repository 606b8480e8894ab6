package ratelimitheader

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// fuzzDate is the Date header every fuzzed response carries, unless the
// fuzzer replaces it.
const fuzzDate = "Tue, 10 Mar 2026 12:00:00 GMT"

// checkFuzzed fails on any broken invariant of a parsed Signal.
func checkFuzzed(t *testing.T, s Signal) {
	t.Helper()
	checkInvariants(t, s)
}

func FuzzRetryAfter(f *testing.F) {
	for _, v := range []string{"120", "2.0", "-5", "", "soon", "1e3", "NaN", "+5", "1_000", "99999999999999999999",
		"Tue, 10 Mar 2026 12:02:00 GMT", "Tuesday, 10-Mar-26 12:01:00 GMT", "Tue Mar 10 12:00:45 2026",
		"Tue, 10 Mar 2026 12:01:00 +0000", "0.0000000001", "18446744073709551616.9", "2026-03-11T00:00:00Z",
		"2026-03-10T07:00:01.5-05:00", "9999-12-31T23:59:59Z", "2026-03-10T12:05:00"} {
		f.Add(v, "16500")
	}
	f.Fuzz(func(t *testing.T, ra, ms string) {
		in := &Input{Header: http.Header{"Date": {fuzzDate}}, Now: caseNow}
		if d, ok := parseRetryAfter(ra, newInput(in)); ok && d < 0 {
			t.Fatalf("parseRetryAfter(%q) = %v", ra, d)
		}
		h := http.Header{"Date": {fuzzDate}, "Retry-After": {ra}, "X-Ms-Retry-After-Ms": {ms}}
		checkFuzzed(t, Parse(&Input{Status: 429, Header: h, Now: caseNow}))
		h = http.Header{"Date": {fuzzDate}, "Retry-After": {ms}, "Beta-Retry-After": {ra}}
		checkFuzzed(t, Parse(&Input{Status: 429, Header: h, Now: caseNow}))
	})
}

func FuzzParseReset(f *testing.F) {
	for _, v := range []string{"42", "1773144060", "1773144001.250", "1773144030000", "2026-03-10T12:00:30Z",
		"Tue, 10 Mar 2026 12:01:00 GMT", "6m0s", "547ms", "1.5s", "-1s", "9223372036s", "99999999999999999999",
		"Tue Mar 10 2026 13:00:02 GMT+0100 (Central European Standard Time)", "Tue Mar 10 2026 13:00:02 GMT+0100 ()",
		"2026-03-10 12:00:30Z", "2026-03-10T13:00:30+0100", "Tue, 10 Mar 2026 12:00:30 +0000",
		"2026-03-10T12:00:30", "2026-03-10 12:58:59.999", "2026-03-10T11:59", "9999-12-31 23:59", "2026-03-10 05:00:30 -0700"} {
		f.Add(v, fuzzDate)
	}
	f.Fuzz(func(t *testing.T, v, date string) {
		in := &Input{Header: http.Header{"Date": {date}}, Now: caseNow}
		for name, parse := range map[string]func(string) (time.Duration, bool){
			"parseReset":   func(v string) (time.Duration, bool) { return parseReset(v, newInput(in)) },
			"parseSeconds": parseSeconds,
			"parseMillis":  parseMillis,
		} {
			if d, ok := parse(v); d < 0 || (!ok && d != 0) {
				t.Fatalf("%s(%q) = %v, %v", name, v, d, ok)
			}
		}
		for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04"} {
			if tm, err := time.Parse(layout, v); err == nil {
				if d, ok := naiveReset(tm, newInput(in)); ok && (d < 0 || d >= naiveHorizon) || !ok && d != 0 {
					t.Fatalf("naiveReset(%q) = %v, %v", v, d, ok)
				}
			}
		}
		if n, ok := parseCount(v); n < 0 || (!ok && n != 0) {
			t.Fatalf("parseCount(%q) = %v, %v", v, n, ok)
		}
	})
}

func FuzzIETF(f *testing.F) {
	f.Add(`"burst";q=100;w=60,"daily";q=1000;w=86400`, `"burst";r=99;t=59`, "10")
	f.Add(`"a";q=1;qu="content-bytes";pk=:AQ==:`, `"a";r=0;t=5, "b";r=1.5;t=30`, "")
	f.Add(`10;w=1`, `limit=10, remaining=0, reset=10`, "10, 10;w=1")
	f.Add(``, `"default";R=5;t=30`, "-1")
	f.Add(`default;q=5`, `default;r=0;t=999999999999999,`, "x")
	f.Add(`"peruser";q=100;w=60;pk=:cHsdsRa894==:`, `"peruser";r=40;t=10;pk=:cHsdsRa894==:`, "3, 2")
	f.Add(`10;w=1`, `"a";r=1;pk=x`, "10, 10;w=1, 1000;w=3600")
	f.Add(``, ``, "76;w=21600")
	f.Fuzz(func(t *testing.T, policy, limit, limitField string) {
		h := http.Header{
			"Date":                {fuzzDate},
			"Ratelimit-Policy":    strings.Split(policy, "\n"),
			"Ratelimit":           strings.Split(limit, "\n"),
			"Ratelimit-Limit":     {limitField},
			"Ratelimit-Remaining": {limitField},
			"Ratelimit-Reset":     {limitField},
			// Yelp's joined names: a scope and a window before Limit and Remaining.
			"Ratelimit-Dailylimit":         {limitField},
			"Ratelimit-Resourcedailylimit": {policy},
			"Ratelimit-Resourceremaining":  {limitField, limit},
			"Ratelimit-Resettime":          {limit},
		}
		for _, status := range []int{200, 429} {
			checkFuzzed(t, Parse(&Input{Status: status, Header: h, Now: caseNow}))
		}
	})
}

// vendorFields are the fields FuzzVendor sets, each to a fuzzed value.
var vendorFields = []string{
	"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "X-Ratelimit-Reset-After", "X-Ratelimit-Bucket",
	"X-Ratelimit-Global", "X-Ratelimit-Scope", "X-Rate-Limit-Remaining", "X-Rate-Limit-Reset",
	"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens",
	"X-Ratelimit-Limit-Minute", "X-Ratelimit-Remaining-Minute", "Anthropic-Ratelimit-Requests-Remaining",
	"Anthropic-Ratelimit-Requests-Reset", "X-Shopify-Shop-Api-Call-Limit", "X-Hubspot-Ratelimit-Remaining",
	"X-Hubspot-Ratelimit-Interval-Milliseconds", "Zendesk-Ratelimit-Tickets-Index", "Stripe-Should-Retry",
	"X-Ratelimit-Requests-Remaining", "X-Ratelimit-Requests-Reset", "X-Ratelimit-Limit", "X-Ratelimit-Usage",
	"X-App-Limit-24hour-Remaining", "X-App-Limit-24hour-Reset", "X-Readratelimit-Usage", "X-Ratelimit-Complexity-Remaining",
	"Sforce-Limit-Info", "Stripe-Rate-Limited-Reason", "Ratelimit-Reason", "Ratelimit-Remaining", "Ratelimit-Reset",
	"X-Ratelimit-Reset-At", "X-Ratelimit-Reset-Ms", "X-Ratelimit-Resettime",
	"X-Sentry-Rate-Limit-Remaining", "X-Sentry-Rate-Limit-Reset", "X-Sib-Ratelimit-Limit", "X-Ratelimit-Retry-After", "X-Ratelimit-Next", "X-Ratelimit-Fillrate", "X-Ratelimit-Interval-Seconds",
	"X-Rate-Limit-Api-Token-Max", "X-Rate-Limit-Api-Token-Remaining", "X-Rate-Limit-Api-Token-Interval-Ms", "X-Rate-Limit-Member-Remaining",
	"X-Ratelimit-Interval", "X-Ratelimit-Period", "X-Ratelimit-Window-Size", "X-Ratelimit-Remaining-30", "X-Ms-Ratelimit-Remaining-Subscription-Reads",
	"Fastly-Ratelimit-Remaining", "Fastly-Ratelimit-Reset", "Rate-Limit-Remaining", "Rate-Limit-Reset",
	"X-Featureratelimit-Remaining", "X-Featureratelimit-Reset", "X-Ms-Ratelimit-Remaining-Resource",
	"X-Limit-Per-Second", "X-Remaining-This-Second", "X-Limit-Per-Day", "X-Remaining-Today", "X-Daylimit-Remaining",
	"X-Minlimit-Remaining", "X-Appminlimit-Remaining", "X-Rate-Limit-Problem",
	"X-Discogs-Ratelimit", "X-Contentful-Ratelimit-Reset", "X-Contentful-Ratelimit-Second-Limit",
	"X-App-Rate-Limit", "X-App-Rate-Limit-Count", "X-Method-Rate-Limit", "X-Method-Rate-Limit-Count", "X-Ratelimit",
	"X-Ratelimit-Global-Remaining", "X-Ratelimit-Route-Remaining", "X-Ratelimit-Remaining-Org", "X-Ratelimit-Reset-Seconds-Org",
	"X-Bapi-Limit", "X-Bapi-Limit-Status", "X-Bapi-Limit-Reset-Timestamp", "X-Ratelimit-Name",
	"Auth0-Client-Quota-Limit", "Auth0-Organization-Quota-Limit", "Beta-Retry-After", "X-Ratelimit-Used",
}

func FuzzVendor(f *testing.F) {
	f.Add(uint16(403), "0", "1773144900", `{"message":"API rate limit exceeded"}`)
	f.Add(uint16(429), "0", "1.5s", `{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}`)
	f.Add(uint16(429), "599.0", "2026-03-10T12:00:30Z", `{"retry_after":64.57,"global":true}`)
	f.Add(uint16(200), "32/40", "total=100; remaining=99; resets=41", "")
	f.Add(uint16(429), "true", "1773144030000", `{"retry_after":`)
	f.Add(uint16(429), "7, 0", "20, 1800", `{"error":{"status":"RESOURCE_EXHAUSTED","details":[{"quotaId":"GenerateRequestsPerMinutePerProjectPerModel","quotaValue":"15"},{"retryDelay":"1.5s"}]}}`)
	f.Add(uint16(403), "api-usage=18/5000, per-app-api-usage=17/250(appName=x)", "200,2000", `[{"errorCode":"REQUEST_LIMIT_EXCEEDED"}]`)
	f.Add(uint16(429), "resource-specific", "2026-03-10T12:01Z", `{"error":{"code":"lock_timeout"}}`)
	f.Add(uint16(400), "0", "Tue, 10 Mar 2026 12:00:30 GMT, Tue, 10 Mar 2026 12:00:45 GMT", `{"errors":[{"extensions":{"code":"RATELIMITED"}}]}`)
	f.Add(uint16(403), "20, 20;w=60", "Tue Mar 10 2026 13:00:02 GMT+0100 (CET)", "")
	f.Add(uint16(429), "jira-per-issue-on-write", "6m0s", `{"type":"error","error":{"type":"rate_limit_error","message":"Extra usage is required"}}`)
	f.Add(uint16(429), "0", "2026-03-10T12:00:30", `{"error":"API_TOKEN_LIMIT_EXCEEDED","message":"Rate limit exceeded"}`)
	f.Add(uint16(200), "198", "2026-03-10 05:00:30 -0700", "")
	f.Add(uint16(429), "60000", "1500", "")
	f.Add(uint16(200), "Total=100, REMAINING=0; reset=7", "remaining=0; resets=99999999999999999999999;;=", "")
	f.Add(uint16(429), "Microsoft.Compute/HighCostGet3Min;0,Microsoft.Compute/HighCostGet30Min;587", "Microsoft.Compute/PutVM30Min; 99999999999999999999", "")
	f.Add(uint16(429), "0", "7", `{"errors":[{"extensions":{"code":"COMPLEXITY_BUDGET_EXHAUSTED","retry_in_seconds":7}}]}`)
	f.Add(uint16(418), "120", "-5", `{"code":-1003,"msg":"Way too much request weight used; IP banned until 1773144120000."}`)
	f.Add(uint16(429), "20:1,100:120", `{"name":"UNAUTHED_API_GET_LIMIT","period":300,"limit":1000,"remaining":0,"until":"2026-03-10T12:00:10Z"}`, "")
	f.Add(uint16(200), "21:10, 5:99999999999, :", "1773144007000", "")
	f.Add(uint16(429), "0", "1", `{"message":"429: too many requests","retry_after":19,"scope":"generic_get","code":0}`)
	f.Add(uint16(429), "6457", "7", `{"message":"You are being rate limited.","retry_after":6457,"global":false}`)
	f.Add(uint16(429), "0", "0.5", `{"retry_after":18446744073709551616}`)
	f.Add(uint16(429), "0", "1773144060", `{"code":"RATE_LIMIT_HIT","result":"error","retry-after":28.706807374954224}`)
	f.Add(uint16(429), "2", "0", `{"errcode":"M_LIMIT_EXCEEDED","retry_after_ms":18446744073709551616}`)
	f.Add(uint16(429), "b=per_hour;q=10;r=0;t=1200,b=per_day;q=50;r=47;t=43200", "B=per_day; Q=; r=0;t=99999999999999999999", `{"retry-seconds": 60,}`)
	f.Fuzz(func(t *testing.T, status uint16, a, b, body string) {
		h := http.Header{"Date": {fuzzDate}}
		for i, k := range vendorFields {
			if i%2 == 0 {
				h[k] = []string{a}
			} else {
				h[k] = []string{b, a}
			}
		}
		in := &Input{Status: int(status), Header: h, Body: []byte(body), Now: caseNow}
		checkFuzzed(t, Parse(in))
	})
}

func FuzzFieldItems(f *testing.F) {
	for _, v := range []string{"10, 20", "Tue, 10 Mar 2026 12:00:30 GMT, Tue, 10 Mar 2026 12:00:45 GMT", ",,", "Tue,", " a , b ,",
		"Monday, 09-Mar-26 12:00:00 GMT", "20:1", "5:99999999999", "X-App-Rate-Limit", "api-usage=18/5000, per-app-api-usage=17/250(appName=a,b)", "600s", "Api-Token", "Daily", "31622401", "Fastly-RateLimit-Reset", "x-ms-ratelimit-remaining-tenant-reads", "Rate-Limit-",
		"X-FeatureRateLimit-Reset", "x-ratelimit-", "Microsoft.Compute/HighCostGet30Min", "Gen2d", "1000year", "300Year", "X-Appminlimit-Remaining", "X-Remaining-Today", "X-Limit-Per-Second",
		"X-Discogs-Ratelimit", "x-a-rate-limit", "Foo-Ratelimit"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, item := range fieldItems(nil, []string{v, v}) {
			if item == "" || item != trimOWS(item) || !strings.Contains(v, item) {
				t.Fatalf("fieldItems(%q): bad member %q", v, item)
			}
		}
		if d, ok := parseProtoDuration(v); d < 0 || (!ok && d != 0) {
			t.Fatalf("parseProtoDuration(%q) = %v, %v", v, d, ok)
		}
		if d, ok := periodName(v); d < 0 || d > maxPeriod || (!ok && d != 0) {
			t.Fatalf("periodName(%q) = %v, %v", v, d, ok)
		}
		_, _ = splitXName(v)
		if n, w, ok := parsePair(v); n < 0 || w < 0 || w > maxPeriod || ok && w == 0 {
			t.Fatalf("parsePair(%q) = %v, %v, %v", v, n, w, ok)
		}
		// The rest is the name's tail, or "Limit" for a bare X-<vendor>-RateLimit.
		bare := strings.HasSuffix(strings.ToLower(v), "limit") && strings.HasPrefix(strings.ToLower(v), "x-")
		if rest := vendorRest(v); !strings.HasSuffix(v, rest) && !(rest == "Limit" && bare) || rest != "" && !mayBeVendor(v) {
			t.Fatalf("vendorRest(%q) = %q, mayBeVendor %v", v, rest, mayBeVendor(v))
		}
		if tm, ok := parseJSDate(v); !ok && !tm.IsZero() {
			t.Fatalf("parseJSDate(%q) = %v, false", v, tm)
		}
		_, _ = xKind(v)
		if kind, f, d := windowedName(v); d < 0 || d > 24*time.Hour || (f == xNone) != (d == 0) || kind != "Day" && !strings.Contains(v, kind) {
			t.Fatalf("windowedName(%q) = %q, %v, %v", v, kind, f, d)
		}
		if w := xLimitWord(v); w != "" && !strings.HasPrefix(v[2:], w) {
			t.Fatalf("xLimitWord(%q) = %q", v, w)
		}
		if d := policyWindow(v); d < 0 || d > maxPeriod {
			t.Fatalf("policyWindow(%q) = %v", v, d)
		}
		if w := xWordKind(v); w != "" && !strings.HasPrefix(v[2:], w) {
			t.Fatalf("xWordKind(%q) = %q", v, w)
		}
		for name, parse := range map[string]func(string) (time.Duration, bool){"parsePeriod": parsePeriod, "parsePeriodMillis": parsePeriodMillis,
			"parseDurationPeriod": parseDurationPeriod} {
			if d, ok := parse(v); d < 0 || d > maxPeriod || (!ok && d != 0) || (ok && d == 0) {
				t.Fatalf("%s(%q) = %v, %v", name, v, d, ok)
			}
		}
	})
}

func FuzzJSONValue(f *testing.F) {
	f.Add([]byte(`{"message":"You are being rate limited.","retry_after":64.57,"global":false}`), "retry_after")
	f.Add([]byte(`{"error":{"type":"insufficient_quota"`), "type")
	f.Add([]byte(`"\"retry_after\":5`), "retry_after")
	f.Add([]byte(`{"a":[1,"b",{"retry-seconds":60}],"retryAfterMs":"x\"y"}`), "retryAfterMs")
	f.Fuzz(func(t *testing.T, body []byte, key string) {
		v, isString, ok := jsonValue(body, key)
		if !ok && (v != nil || isString) {
			t.Fatalf("jsonValue returned a value with !ok")
		}
		_ = containsFold(body, strings.ToLower(key))
		jsonMembers(body, func(k, v []byte, _ bool) bool {
			_, _ = delayKind(k)
			if len(k) > len(body) || len(v) > len(body) {
				t.Fatalf("jsonMembers returned more than the snippet")
			}
			return true
		})
	})
}

// FuzzParseSignal runs the whole entry point over arbitrary header maps:
// raw is read as "Name: value" lines.
func FuzzParseSignal(f *testing.F) {
	for _, v := range loadVectors(f) {
		var raw strings.Builder
		for _, kv := range v.Headers {
			raw.WriteString(kv[0] + ": " + kv[1] + "\n")
		}
		f.Add(uint16(v.Status), raw.String(), []byte(v.Body), int64(0))
	}
	f.Add(uint16(429), "retry-after: 5\nAGE: 0\nx-RateLimit-remaining: 0\n", []byte(nil), int64(-3e9))
	f.Fuzz(func(t *testing.T, status uint16, raw string, body []byte, offset int64) {
		h := http.Header{}
		for line := range strings.Lines(raw) {
			k, v, _ := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
			h[k] = append(h[k], strings.TrimSpace(v))
		}
		in := &Input{Status: int(status), Header: h, Body: body, Now: caseNow}
		if offset != 0 {
			in.ServerNow = caseNow.Add(time.Duration(offset))
		}
		checkFuzzed(t, Parse(in))
		checkFuzzed(t, (&Parser{MaxServerWait: time.Second}).Parse(in))
		// As a client that learned the server's units reads it.
		ms := *in
		ms.MillisecondResets, ms.MillisecondDelays = true, true
		checkFuzzed(t, Parse(&ms))
	})
}
