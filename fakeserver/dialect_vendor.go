package fakeserver

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"time"
)

// GitHub is the dialect of the GitHub REST API. Every response carries
//
//	X-Ratelimit-Limit: 5000
//	X-Ratelimit-Remaining: 4999
//	X-Ratelimit-Used: 1
//	X-Ratelimit-Reset: 1773147600
//	X-Ratelimit-Resource: core
//
// where Limit is the capacity (Burst for the buckets), Used is Limit minus
// Remaining, and Reset is the Unix time, on the server's clock and rounded up
// to the second, when the quota is restored in full. Exhausting this primary
// limit answers 403 with a JSON message "API rate limit exceeded..." and no
// Retry-After.
type GitHub struct {
	// Resource is the value of X-Ratelimit-Resource. Empty means "core".
	Resource string
	// Secondary makes every rejection a secondary rate limit instead: a 429
	// with Retry-After in whole seconds and a message about a secondary
	// rate limit.
	Secondary bool
}

const githubDocs = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"

// Header adds the X-Ratelimit-* headers.
func (d GitHub) Header(h http.Header, s State) {
	h.Set("X-Ratelimit-Limit", strconv.Itoa(s.Capacity))
	h.Set("X-Ratelimit-Remaining", strconv.Itoa(s.Remaining))
	h.Set("X-Ratelimit-Used", strconv.Itoa(s.Used()))
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(ceilTime(s.Now.Add(s.ResetAfter)).Unix(), 10))
	h.Set("X-Ratelimit-Resource", cmpOr(d.Resource, "core"))
}

// Reject returns GitHub's 403 for the primary limit, or its 429 with
// Retry-After for a secondary limit.
func (d GitHub) Reject(h http.Header, s State) Rejection {
	if d.Secondary {
		secs := ceilSeconds(s.RetryAfter)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
		return jsonRejection(h, http.StatusTooManyRequests, mustJSON(map[string]string{
			"message":           "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
			"documentation_url": githubDocs,
		}), time.Duration(secs)*time.Second)
	}
	reset := ceilTime(s.Now.Add(s.ResetAfter))
	return jsonRejection(h, http.StatusForbidden, mustJSON(map[string]string{
		"message":           "API rate limit exceeded.",
		"documentation_url": githubDocs,
	}), reset.Sub(s.Now))
}

// OpenAI is the dialect of the OpenAI API, for its request limit:
//
//	X-Ratelimit-Limit-Requests: 50
//	X-Ratelimit-Remaining-Requests: 49
//	X-Ratelimit-Reset-Requests: 1.5s
//
// where Reset is the time until the quota is restored in full, as a Go
// duration rounded up to the millisecond ("6m0s", "1.5s", "547ms"). A
// rejection is a 429 with a JSON error and no Retry-After.
type OpenAI struct{}

// Header adds the X-Ratelimit-*-Requests headers.
func (OpenAI) Header(h http.Header, s State) {
	h.Set("X-Ratelimit-Limit-Requests", strconv.Itoa(s.Limit))
	h.Set("X-Ratelimit-Remaining-Requests", strconv.Itoa(s.Remaining))
	h.Set("X-Ratelimit-Reset-Requests", ceilTo(s.ResetAfter, time.Millisecond).String())
}

// Reject returns a 429 with OpenAI's rate_limit_exceeded error.
func (OpenAI) Reject(h http.Header, s State) Rejection {
	return jsonRejection(h, http.StatusTooManyRequests,
		`{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
		ceilTo(s.ResetAfter, time.Millisecond))
}

// Shopify is the dialect of the Shopify REST Admin API, a leaky bucket
// (use it with LeakyBucket, Burst as the bucket's size):
//
//	X-Shopify-Shop-Api-Call-Limit: 32/40
//
// the bucket's level after this request over its capacity. It never states
// the leak rate. A rejection is a 429 with Retry-After in decimal seconds
// ("2.0"), rounded up to a tenth, or to Round.
type Shopify struct {
	// Round is the unit Retry-After is rounded up to. Zero means a tenth
	// of a second; a second gives the "1.0" Shopify sends for a wait of a
	// tenth.
	Round time.Duration
}

// Header adds X-Shopify-Shop-Api-Call-Limit.
func (Shopify) Header(h http.Header, s State) {
	h.Set("X-Shopify-Shop-Api-Call-Limit", strconv.Itoa(s.Used())+"/"+strconv.Itoa(s.Capacity))
}

// Reject returns a 429 with a decimal Retry-After.
func (d Shopify) Reject(h http.Header, s State) Rejection {
	unit := d.Round
	if unit <= 0 {
		unit = 100 * time.Millisecond
	}
	wait := ceilTo(s.RetryAfter, unit)
	h.Set("Retry-After", strconv.FormatFloat(wait.Seconds(), 'f', 1, 64))
	perSec := float64(s.Limit) / s.Window.Seconds()
	return jsonRejection(h, http.StatusTooManyRequests, mustJSON(map[string]string{
		"errors": fmt.Sprintf("Exceeded %s calls per second for api client. Reduce request rates to resume uninterrupted service.",
			strconv.FormatFloat(perSec, 'f', -1, 64)),
	}), wait)
}

// Discord is the dialect of the Discord API's per-route buckets:
//
//	X-Ratelimit-Limit: 5
//	X-Ratelimit-Remaining: 0
//	X-Ratelimit-Reset: 1773144001.250
//	X-Ratelimit-Reset-After: 1.250
//	X-Ratelimit-Bucket: 9f1c0a3e
//
// where Limit is the capacity (Burst for the buckets), Reset the Unix time on
// the server's clock and Reset-After the seconds until the quota is restored
// in full, both with milliseconds, rounded up. A rejection is a 429 with
// Retry-After in whole seconds, X-Ratelimit-Scope, and the JSON body
// {"message":"You are being rate limited.","retry_after":1.25,"global":false}
// whose retry_after has millisecond precision. A rejection by the global
// limit (Config.Global) carries X-Ratelimit-Global: true, the scope
// "global", "global":true in the body, and no bucket headers.
type Discord struct {
	// Bucket is the value of X-Ratelimit-Bucket. Empty means a hash of the
	// request's key, so that keys have distinct buckets.
	Bucket string
	// Scope is the value of X-Ratelimit-Scope on a rejection. Empty means
	// "user".
	Scope string
}

// Header adds the X-Ratelimit-* headers, except on a global rejection.
func (d Discord) Header(h http.Header, s State) {
	if s.Global {
		return
	}
	bucket := d.Bucket
	if bucket == "" {
		f := fnv.New32a()
		_, _ = f.Write([]byte(s.Key))
		bucket = fmt.Sprintf("%08x", f.Sum32())
	}
	reset := ceilTo(time.Duration(s.Now.Add(s.ResetAfter).UnixNano()), time.Millisecond)
	h.Set("X-Ratelimit-Limit", strconv.Itoa(s.Capacity))
	h.Set("X-Ratelimit-Remaining", strconv.Itoa(s.Remaining))
	h.Set("X-Ratelimit-Reset", strconv.FormatFloat(reset.Seconds(), 'f', 3, 64))
	h.Set("X-Ratelimit-Reset-After", strconv.FormatFloat(ceilTo(s.ResetAfter, time.Millisecond).Seconds(), 'f', 3, 64))
	h.Set("X-Ratelimit-Bucket", bucket)
}

// Reject returns Discord's 429.
func (d Discord) Reject(h http.Header, s State) Rejection {
	wait := ceilTo(s.RetryAfter, time.Millisecond)
	h.Set("Retry-After", strconv.FormatInt(ceilSeconds(s.RetryAfter), 10))
	scope := cmpOr(d.Scope, "user")
	if s.Global {
		scope = "global"
		h.Set("X-Ratelimit-Global", "true")
	}
	h.Set("X-Ratelimit-Scope", scope)
	body := fmt.Sprintf(`{"message":"You are being rate limited.","retry_after":%s,"global":%t}`,
		strconv.FormatFloat(wait.Seconds(), 'f', -1, 64), s.Global)
	return jsonRejection(h, http.StatusTooManyRequests, body, wait)
}

// Anthropic is the dialect of the Anthropic API, for its request limit:
//
//	Anthropic-Ratelimit-Requests-Limit: 50
//	Anthropic-Ratelimit-Requests-Remaining: 49
//	Anthropic-Ratelimit-Requests-Reset: 2026-03-10T12:00:01Z
//
// where Limit is the stated limit (Config.StatedLimit), and Reset the
// instant, in RFC 3339 on the server's clock and rounded up to the second,
// at which the quota is restored in full. A rejection is a 429 with
// Retry-After in whole seconds, rounded up.
type Anthropic struct{}

// Header adds the Anthropic-Ratelimit-Requests-* headers.
func (Anthropic) Header(h http.Header, s State) {
	h.Set("Anthropic-Ratelimit-Requests-Limit", strconv.Itoa(s.Limit))
	h.Set("Anthropic-Ratelimit-Requests-Remaining", strconv.Itoa(s.Remaining))
	h.Set("Anthropic-Ratelimit-Requests-Reset", ceilTime(s.Now.Add(s.ResetAfter)).UTC().Format(time.RFC3339))
}

// Reject returns a 429 with Retry-After in seconds and Anthropic's error.
func (Anthropic) Reject(h http.Header, s State) Rejection {
	secs := ceilSeconds(s.RetryAfter)
	h.Set("Retry-After", strconv.FormatInt(secs, 10))
	return jsonRejection(h, http.StatusTooManyRequests,
		`{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit."}}`,
		time.Duration(secs)*time.Second)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
