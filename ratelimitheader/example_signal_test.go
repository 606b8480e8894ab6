package ratelimitheader_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/headway-go/headway/ratelimitheader"
)

// A GitHub primary rate limit: a 403 with x-ratelimit-remaining: 0. The
// reset is an epoch, measured against the response's Date, not the local
// clock (which here runs a minute slow).
func ExampleParse() {
	h := http.Header{}
	h.Set("Date", "Tue, 10 Mar 2026 12:00:00 GMT")
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset", "1773144900")
	h.Set("X-RateLimit-Resource", "core")

	sig := ratelimitheader.Parse(&ratelimitheader.Input{
		Status: http.StatusForbidden,
		Header: h,
		Body:   []byte(`{"message":"API rate limit exceeded for user ID 1."}`),
		Now:    time.Date(2026, 3, 10, 11, 59, 0, 0, time.UTC),
	})
	fmt.Println("throttled:", sig.Throttled, "permanent:", sig.Permanent)
	fmt.Println("wait:", sig.Wait, sig.HasWait)
	fmt.Println("remaining:", sig.Remaining, "of", sig.Limit, "in bucket", sig.Bucket)
	// Output:
	// throttled: true permanent: false
	// wait: 15m0s true
	// remaining: 0 of 5000 in bucket core
}

// IETF RateLimit fields on a successful response: nothing to wait for, but
// the quota left and the policy it belongs to.
func ExampleParser_Parse() {
	h := http.Header{}
	h.Add("RateLimit-Policy", `"burst";q=100;w=60, "daily";q=1000;w=86400`)
	h.Add("RateLimit", `"burst";r=99;t=59`)

	var p ratelimitheader.Parser // zero value: default dialects, 10-minute cap
	sig := p.Parse(&ratelimitheader.Input{Status: http.StatusOK, Header: h, Now: time.Now()})
	fmt.Printf("%d left, resets in %v, policy %d per %v\n", sig.Remaining, sig.Reset, sig.Limit, sig.Period)
	// Output:
	// 99 left, resets in 59s, policy 100 per 1m0s
}

// A Dialect teaches the parser a vendor's fields without forking it.
func ExampleDialectFunc() {
	acme := ratelimitheader.DialectFunc(func(in *ratelimitheader.Input, s *ratelimitheader.Signal) {
		if in.Header.Get("X-Acme-Slow-Down") == "1" {
			s.AddRetryAfter(3 * time.Second)
			s.Throttled = true
		}
	})
	p := ratelimitheader.Parser{Dialects: append(ratelimitheader.DefaultDialects(), acme)}

	h := http.Header{"X-Acme-Slow-Down": {"1"}}
	sig := p.Parse(&ratelimitheader.Input{Status: http.StatusOK, Header: h, Now: time.Now()})
	fmt.Println(sig.Throttled, sig.Wait)
	// Output:
	// true 3s
}

// The built-in header dialects, in the order Parse runs them.
func ExampleDefaultDialects() {
	fmt.Println(ratelimitheader.DefaultDialects())
	// Output:
	// [ietf x-ratelimit github discord openai anthropic shopify hubspot zendesk stripe google salesforce atlassian linear quota-limit]
}
