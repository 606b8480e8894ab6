package ratelimitheader

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

var benchNow = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// typical200 is a 200 as the issue describes it: Content-Type,
// Content-Length, Date, Server, Cache-Control and a few more, none of them a
// rate-limit field.
func typical200() http.Header {
	return http.Header{
		"Content-Type":   {"application/json; charset=utf-8"},
		"Content-Length": {"1432"},
		"Date":           {"Tue, 10 Mar 2026 12:00:00 GMT"},
		"Server":         {"nginx"},
		"Cache-Control":  {"private, max-age=60"},
		"Vary":           {"Accept-Encoding"},
		"Etag":           {`W/"5f3c-1a2b"`},
		"X-Request-Id":   {"0b6f1c1e-5c36-4a57-9d1c-1bd2c1f2a3b4"},
	}
}

// allFields are fields a 200 may carry, none of them a rate-limit field, to
// measure how the cost grows with the header.
var allFields = []string{
	"Content-Type", "Content-Length", "Date", "Server", "Cache-Control", "Vary", "Etag", "X-Request-Id",
	"X-Content-Type-Options", "Strict-Transport-Security", "Access-Control-Allow-Origin",
	"Set-Cookie", "Last-Modified", "Accept-Ranges", "Alt-Svc", "Referrer-Policy",
}

var sinkSignal Signal

func benchParse(b *testing.B, in *Input) {
	b.ReportAllocs()
	for b.Loop() {
		sinkSignal = Parse(in)
	}
}

func BenchmarkParseNoRateLimitHeaders(b *testing.B) {
	benchParse(b, &Input{Status: 200, Header: typical200(), Now: benchNow})
}

// BenchmarkParseNoRateLimitHeadersScaling shows the cost per header field,
// next to the floor: a bare range over the same map, which is most of it.
func BenchmarkParseNoRateLimitHeadersScaling(b *testing.B) {
	for _, n := range []int{4, 8, 12, 16} {
		h := http.Header{}
		for _, k := range allFields[:n] {
			h[k] = []string{"x"}
		}
		in := &Input{Status: 200, Header: h, Now: benchNow}
		b.Run(fmt.Sprintf("fields=%d", n), func(b *testing.B) { benchParse(b, in) })
		b.Run(fmt.Sprintf("fields=%d/bare-range", n), func(b *testing.B) {
			for b.Loop() {
				c := 0
				for k := range h {
					c += len(k)
				}
				sinkInt = c
			}
		})
	}
}

var sinkInt int

func BenchmarkParseNoRateLimitHeadersParallel(b *testing.B) {
	in := &Input{Status: 200, Header: typical200(), Now: benchNow}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var s Signal
		for pb.Next() {
			s = Parse(in)
		}
		_ = s
	})
}

func BenchmarkParseGitHub200(b *testing.B) {
	h := typical200()
	h["X-Github-Request-Id"] = []string{"C0DE:1234:5678:9ABC:DEF0"}
	h["X-Ratelimit-Limit"] = []string{"5000"}
	h["X-Ratelimit-Remaining"] = []string{"4999"}
	h["X-Ratelimit-Reset"] = []string{"1773147600"}
	h["X-Ratelimit-Used"] = []string{"1"}
	h["X-Ratelimit-Resource"] = []string{"core"}
	benchParse(b, &Input{Status: 200, Header: h, Now: benchNow})
}

func BenchmarkParseIETF200(b *testing.B) {
	h := typical200()
	h["Ratelimit-Policy"] = []string{`"burst";q=100;w=60, "daily";q=1000;w=86400`}
	h["Ratelimit"] = []string{`"burst";r=99;t=59`}
	benchParse(b, &Input{Status: 200, Header: h, Now: benchNow})
}

func BenchmarkParse429RetryAfter(b *testing.B) {
	h := typical200()
	h["Retry-After"] = []string{"20"}
	benchParse(b, &Input{Status: 429, Header: h, Now: benchNow})
}

func BenchmarkParseGemini429(b *testing.B) {
	h := typical200()
	body := []byte(`{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":` +
		`"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":` +
		`"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaValue":"10"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"55s"}]}}`)
	benchParse(b, &Input{Status: 429, Header: h, Body: body, Now: benchNow})
}

func BenchmarkParseFolded200(b *testing.B) {
	h := typical200()
	h["X-Ratelimit-Limit"] = []string{"5000, 5000"}
	h["X-Ratelimit-Remaining"] = []string{"4999, 4999"}
	h["X-Ratelimit-Reset"] = []string{"1773147600, 1773147600"}
	benchParse(b, &Input{Status: 200, Header: h, Now: benchNow})
}

// TestParseNoRateLimitHeadersBudget holds the fast path to its promise: no
// allocation (timing is left to the benchmark, machines differ).
func TestParseNoRateLimitHeadersBudget(t *testing.T) {
	in := &Input{Status: 200, Header: typical200(), Now: benchNow}
	if n := testing.AllocsPerRun(100, func() { sinkSignal = Parse(in) }); n != 0 {
		t.Fatalf("Parse on a response without rate-limit fields allocates %v times", n)
	}
}
