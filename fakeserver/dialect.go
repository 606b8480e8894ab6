package fakeserver

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// A Dialect is the way a provider tells its clients about its rate limit:
// which headers it sends, and how it rejects a request. Dialects are pure
// functions of a State; adding a provider is one small type with two
// methods. The Server calls them with its lock held, so they must not call
// back into the Server.
type Dialect interface {
	// Header adds the dialect's rate-limit headers for a request in state s
	// to h. It is called for every limited request, admitted or not.
	Header(h http.Header, s State)

	// Reject returns the response to a rejected request, after Header.
	// It may add more headers to h.
	Reject(h http.Header, s State) Rejection
}

// State is what the limiter decided for one request, as a Dialect sees it.
type State struct {
	// Key is the request's key (see Config.Key).
	Key string
	// Allowed reports whether the request was admitted.
	Allowed bool
	// Limit and Window are the configured policy: Limit requests per Window.
	Limit  int
	Window time.Duration
	// Capacity is the most Remaining can be: Burst for the bucket
	// algorithms, Limit for the window algorithms.
	Capacity int
	// Remaining is the number of requests the key could send right after
	// this one and still be admitted.
	Remaining int
	// ResetAfter is the time until Remaining is back to Capacity.
	ResetAfter time.Duration
	// NextAfter is the time until Remaining is at least one; zero if it is.
	NextAfter time.Duration
	// RetryAfter is, for a rejected request, the exact time until the same
	// request would be admitted; zero for an admitted one.
	RetryAfter time.Duration
	// Now is the server's clock, ClockSkew and ClockDrift included: the
	// time to measure absolute timestamps against, and the time in the
	// Date header.
	Now time.Time
	// Global reports that the request was rejected by the global limit
	// (Config.Global), not its key's: the other fields describe the global
	// limit.
	Global bool
}

// Used returns the part of the capacity in use: Capacity - Remaining.
func (s State) Used() int { return s.Capacity - s.Remaining }

// Rejection is the response to a rejected request.
type Rejection struct {
	// Status is the status code, such as 429.
	Status int
	// Body is the response body; its Content-Type goes in the header.
	Body []byte
	// Wait is the delay the response tells the client to wait, as the
	// client computes it from the response (so rounded as the response
	// rounds it). Zero means the response names no delay; the Server then
	// uses State.RetryAfter to count Early requests.
	Wait time.Duration
}

// Bare is the dialect of a server that says nothing: no rate-limit headers,
// and a 429 with no Retry-After and an empty body.
type Bare struct{}

// Header adds nothing.
func (Bare) Header(http.Header, State) {}

// Reject returns a bare 429.
func (Bare) Reject(http.Header, State) Rejection {
	return Rejection{Status: http.StatusTooManyRequests}
}

// RetryAfterSeconds is the default dialect, RFC 9110's: no headers on
// admitted responses, and a 429 with Retry-After in whole seconds, rounded up
// so that a client that waits exactly that long is admitted.
type RetryAfterSeconds struct{}

// Header adds nothing.
func (RetryAfterSeconds) Header(http.Header, State) {}

// Reject returns a 429 with Retry-After in seconds.
func (RetryAfterSeconds) Reject(h http.Header, s State) Rejection {
	secs := ceilSeconds(s.RetryAfter)
	h.Set("Retry-After", strconv.FormatInt(secs, 10))
	return jsonRejection(h, http.StatusTooManyRequests, `{"error":"too many requests"}`, time.Duration(secs)*time.Second)
}

// RetryAfterDate is RFC 9110's other form: a 429 whose Retry-After is an
// HTTP date on the server's clock (see Config.ClockSkew), rounded up to the
// second. A client must measure it against the response's Date header, not
// against its own clock.
type RetryAfterDate struct{}

// Header adds nothing.
func (RetryAfterDate) Header(http.Header, State) {}

// Reject returns a 429 with Retry-After as an HTTP date.
func (RetryAfterDate) Reject(h http.Header, s State) Rejection {
	at := ceilTime(s.Now.Add(s.RetryAfter))
	h.Set("Retry-After", httpDate(at))
	return jsonRejection(h, http.StatusTooManyRequests, `{"error":"too many requests"}`, at.Sub(s.Now))
}

// DialectNames lists the names DialectByName accepts.
var DialectNames = []string{
	"bare", "retry-after", "retry-after-date", "ietf", "ietf-06",
	"github", "github-secondary", "openai", "anthropic", "shopify", "discord",
	"gemini", "salesforce", "atlassian", "hubspot", "azure-openai",
	"x-ratelimit", "sentry", "brevo", "lemlist", "mailerlite", "akamai", "atlassian-dc",
}

// DialectByName returns the dialect with one of the names in DialectNames,
// each with its default settings. A name prefixed with "folded-", such as
// "folded-github", is that dialect behind a proxy that folds field lines
// (Folded).
func DialectByName(name string) (Dialect, error) {
	if inner, ok := strings.CutPrefix(strings.ToLower(strings.TrimSpace(name)), "folded-"); ok {
		d, err := DialectByName(inner)
		if err != nil {
			return nil, err
		}
		return Folded{Dialect: d}, nil
	}
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "bare", "none":
		return Bare{}, nil
	case "retry-after", "retry-after-seconds", "":
		return RetryAfterSeconds{}, nil
	case "retry-after-date":
		return RetryAfterDate{}, nil
	case "ietf", "ietf-11":
		return IETF{}, nil
	case "ietf-06":
		return IETF06{}, nil
	case "github":
		return GitHub{}, nil
	case "github-secondary":
		return GitHub{Secondary: true}, nil
	case "openai":
		return OpenAI{}, nil
	case "anthropic":
		return Anthropic{}, nil
	case "shopify":
		return Shopify{}, nil
	case "discord":
		return Discord{}, nil
	case "gemini":
		return Gemini{}, nil
	case "salesforce":
		return Salesforce{}, nil
	case "atlassian":
		return Atlassian{}, nil
	case "hubspot":
		return HubSpot{}, nil
	case "azure-openai":
		return AzureOpenAI{}, nil
	case "x-ratelimit":
		return XRateLimit{}, nil
	case "sentry":
		return XRateLimit{Prefix: "X-Sentry-Rate-Limit-", Reset: ResetEpoch}, nil
	case "brevo":
		return XRateLimit{Prefix: "x-sib-ratelimit-"}, nil
	case "lemlist":
		return XRateLimit{Reset: ResetJSDate}, nil
	case "mailerlite":
		return XRateLimit{Reset: ResetRFC3339, Wait: WaitPrefixRetryAfter}, nil
	case "akamai":
		return XRateLimit{Reset: ResetNone, Wait: WaitPrefixNext}, nil
	case "atlassian-dc":
		return XRateLimit{Reset: ResetNone, Refill: true}, nil
	}
	return nil, fmt.Errorf("fakeserver: unknown dialect %q (want one of %s)", name, strings.Join(DialectNames, ", "))
}

func jsonRejection(h http.Header, status int, body string, wait time.Duration) Rejection {
	h.Set("Content-Type", "application/json")
	return Rejection{Status: status, Body: []byte(body + "\n"), Wait: wait}
}

// ceilSeconds returns d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 {
	return ceilDiv(int64(d), int64(time.Second))
}

// ceilTime rounds t up to the whole second.
func ceilTime(t time.Time) time.Time {
	if tt := t.Truncate(time.Second); !tt.Equal(t) {
		return tt.Add(time.Second)
	}
	return t.Truncate(time.Second)
}

// ceilTo rounds d up to a multiple of unit.
func ceilTo(d, unit time.Duration) time.Duration {
	return time.Duration(ceilDiv(int64(d), int64(unit)) * int64(unit))
}

func httpDate(t time.Time) string { return t.UTC().Format(http.TimeFormat) }
