// Package bench runs the same rate-limited workload through headway and
// through the libraries a Go programmer would pick instead, against the
// bundled fake server in each of its dialects, and reports how close each
// comes to the least possible time, how many throttles it collected, how
// many requests it sent while told to wait, and how many requests failed.
//
// The runs are made in virtual time (testing/synctest) over the fake
// server's in-memory transport: see TestTable.
package bench

import (
	"net/http"
	"strconv"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"github.com/hashicorp/go-retryablehttp"
	"golang.org/x/time/rate"

	"github.com/headway-go/headway"
)

// A Contender builds the client a program would use, over base, for a
// server that publishes a limit of rate requests per second with the given
// burst.
type Contender struct {
	Name string
	// How says how the contender is configured, for BENCHMARKS.md.
	How string
	New func(base http.RoundTripper, rate, burst int) *http.Client
}

// Contenders are the clients compared, in the order of the table.
var Contenders = []Contender{
	{
		Name: "headway (no limit)",
		How:  "`headway.New(base)`: no limit configured; it paces from the rate-limit headers and throttles it reads, and retries with its defaults (up to 4 attempts).",
		New: func(base http.RoundTripper, _, _ int) *http.Client {
			return &http.Client{Transport: headway.New(base)}
		},
	},
	{
		Name: "headway (limit)",
		How:  "`headway.New(base, headway.WithLimit(headway.PerSecond(rate).WithBurst(burst-1)))`: the published limit, one below its burst as a margin; otherwise the defaults.",
		New: func(base http.RoundTripper, r, burst int) *http.Client {
			return &http.Client{Transport: headway.New(base,
				headway.WithLimit(headway.PerSecond(r).WithBurst(burst-1)))}
		},
	},
	{
		Name: "x/time/rate + retry",
		How: "`rate.NewLimiter(rate.Limit(rate), burst)` shared by all workers, in a RoundTripper that calls `Wait` before every attempt, " +
			"plus the retry a user would write: on a 429, sleep for Retry-After (seconds, decimals accepted) or 1 s without one, up to 3 retries (4 attempts, as headway).",
		New: func(base http.RoundTripper, r, burst int) *http.Client {
			return &http.Client{Transport: &rateRetry{
				base:    base,
				limiter: rate.NewLimiter(rate.Limit(r), burst),
				retries: 3,
			}}
		},
	},
	{
		Name: "go-retryablehttp",
		How: "`retryablehttp.NewClient()` with its defaults (RetryMax 4, RetryWaitMin 1 s, RetryWaitMax 30 s, `DefaultRetryPolicy`, `DefaultBackoff`, which sleeps for an integer or HTTP-date Retry-After on 429 and 503), " +
			"its `HTTPClient.Transport` set to the server's and its Logger off, used through `StandardClient()`. No pacing.",
		New: func(base http.RoundTripper, _, _ int) *http.Client {
			c := retryablehttp.NewClient()
			c.HTTPClient.Transport = base
			c.Logger = nil
			return c.StandardClient()
		},
	},
	{
		Name: "failsafe-go",
		How: "`failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().WithBackoff(time.Second, 30*time.Second).WithMaxRetries(3).Build())`, " +
			"the configuration of its HTTP documentation: retries 429 and most 5xx, waiting for an integer Retry-After when there is one, else backing off. No pacing.",
		New: func(base http.RoundTripper, _, _ int) *http.Client {
			rp := failsafeRetry(3)
			return &http.Client{Transport: failsafehttp.NewRoundTripper(base, rp)}
		},
	},
	{
		Name: "failsafe-go + rate limiter",
		How: "the same retry policy composed with failsafe-go's own rate limiter set to the published rate, " +
			"`failsafehttp.NewRoundTripper(base, retryPolicy, ratelimiter.NewSmoothBuilder[*http.Response](rate, time.Second).WithMaxWaitTime(time.Minute).Build())`: " +
			"the retry policy outermost, so that every attempt waits for a permit. The smooth limiter (one request every 1/rate s) is the one that never exceeds a bucket of the published rate; " +
			"its bursty one admits the whole count at the start of each period, beyond the burst.",
		New: func(base http.RoundTripper, r, _ int) *http.Client {
			rp := failsafeRetry(3)
			rl := ratelimiter.NewSmoothBuilder[*http.Response](uint(r), time.Second).
				WithMaxWaitTime(time.Minute).
				Build()
			return &http.Client{Transport: failsafehttp.NewRoundTripper(base, rp, rl)}
		},
	},
}

// rateRetry is what a user builds from golang.org/x/time/rate: wait for a
// token before every attempt, and on a 429 sleep for Retry-After, or one
// second, then try again.
type rateRetry struct {
	base    http.RoundTripper
	limiter *rate.Limiter
	retries int
}

func (t *rateRetry) RoundTrip(req *http.Request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		if err := t.limiter.Wait(req.Context()); err != nil {
			return nil, err
		}
		resp, err := t.base.RoundTrip(req) // GETs without a body: safe to send again
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || attempt == t.retries {
			return resp, err
		}
		wait := time.Second
		if s, err := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64); err == nil && s >= 0 {
			wait = time.Duration(s * float64(time.Second))
		}
		resp.Body.Close()
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-req.Context().Done():
			timer.Stop()
			return nil, req.Context().Err()
		}
	}
}

// failsafeRetry is failsafe-go's retry policy as its HTTP documentation
// configures it, with the given number of retries.
func failsafeRetry(retries int) failsafe.Policy[*http.Response] {
	return failsafehttp.NewRetryPolicyBuilder().
		WithBackoff(time.Second, 30*time.Second).
		WithMaxRetries(retries).
		Build()
}
