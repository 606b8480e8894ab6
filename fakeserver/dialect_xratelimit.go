package fakeserver

import (
	"net/http"
	"strconv"
	"time"
)

// XRateLimit is the X-RateLimit-* family in the spellings and forms APIs
// other than the named providers send. Every response carries
//
//	<Prefix>Limit: 40
//	<Prefix>Remaining: 39
//	<Prefix>Reset: <when the quota is restored in full, in the Reset form>
//
// (the reset unless its form is ResetNone) and a rejection is a 429 that
// names its wait as the Wait form says. With
// the zero value, Prefix is "X-RateLimit-", the reset a delta in whole
// seconds, and the wait a Retry-After in whole seconds.
type XRateLimit struct {
	// Prefix begins each field's name: "X-Sentry-Rate-Limit-" (Sentry),
	// "x-sib-ratelimit-" (Brevo). Empty means "X-RateLimit-".
	Prefix string
	// Reset is the form of the reset.
	Reset ResetForm
	// Wait is how a rejection names its wait.
	Wait WaitForm
	// Refill states the bucket's refill as Atlassian Data Center does:
	// <Prefix>FillRate, the configured Limit, every
	// <Prefix>Interval-Seconds, the Window in seconds (Limit is then the
	// bucket's size, Capacity).
	Refill bool
}

// ResetForm is a form of a quota's reset in XRateLimit.
type ResetForm uint8

const (
	// ResetDelta is the seconds until the reset, rounded up.
	ResetDelta ResetForm = iota
	// ResetEpoch is the Unix time of the reset in seconds, rounded up
	// (Sentry).
	ResetEpoch
	// ResetEpochMillis is the Unix time of the reset in milliseconds,
	// rounded up.
	ResetEpochMillis
	// ResetRFC3339 is an RFC 3339 timestamp, rounded up to the second.
	ResetRFC3339
	// ResetJSDate is JavaScript's Date string in a zone an hour ahead of
	// UTC, rounded up to the second (lemlist): "Tue Mar 10 2026 13:00:02
	// GMT+0100 (Central European Standard Time)".
	ResetJSDate
	// ResetNone sends no reset (Akamai).
	ResetNone
	// ResetDeltaMillis is the milliseconds until the reset, rounded up
	// (Prisjakt's X-Rate-Limit-Reset: 600000, ten minutes).
	ResetDeltaMillis
)

// WaitForm is how an XRateLimit rejection names its wait.
type WaitForm uint8

const (
	// WaitRetryAfter is a Retry-After in whole seconds, rounded up.
	WaitRetryAfter WaitForm = iota
	// WaitPrefixRetryAfter is <Prefix>Retry-After in whole seconds,
	// rounded up (MailerLite's X-RateLimit-Retry-After).
	WaitPrefixRetryAfter
	// WaitPrefixNext is <Prefix>Next, the instant the request would be
	// admitted as an RFC 3339 timestamp to the millisecond, rounded up
	// (Akamai's X-RateLimit-Next).
	WaitPrefixNext
	// WaitReset names no wait but the reset, with Remaining at 0.
	WaitReset
)

// Header adds the Limit, Remaining and Reset fields.
func (d XRateLimit) Header(h http.Header, s State) {
	p := cmpOr(d.Prefix, "X-RateLimit-")
	h.Set(p+"Limit", strconv.Itoa(s.Capacity))
	h.Set(p+"Remaining", strconv.Itoa(s.Remaining))
	if d.Refill {
		h.Set(p+"FillRate", strconv.Itoa(s.Limit))
		h.Set(p+"Interval-Seconds", strconv.FormatFloat(s.Window.Seconds(), 'f', -1, 64))
	}
	if d.Reset != ResetNone {
		v, _ := d.reset(s.Now, s.ResetAfter)
		h.Set(p+"Reset", v)
	}
}

// reset returns the reset after d from now in d's Reset form, and the wait
// a client reads from it.
func (d XRateLimit) reset(now time.Time, after time.Duration) (string, time.Duration) {
	at := ceilTime(now.Add(after))
	switch d.Reset {
	case ResetEpoch:
		return strconv.FormatInt(at.Unix(), 10), at.Sub(now)
	case ResetEpochMillis:
		ms := now.Add(ceilTo(after, time.Millisecond))
		return strconv.FormatInt(ms.UnixMilli(), 10), ms.Sub(now)
	case ResetRFC3339:
		return at.UTC().Format(time.RFC3339), at.Sub(now)
	case ResetDeltaMillis:
		ms := ceilTo(after, time.Millisecond)
		return strconv.FormatInt(ms.Milliseconds(), 10), ms
	case ResetJSDate:
		cet := time.FixedZone("CET", 3600)
		return at.In(cet).Format("Mon Jan 02 2006 15:04:05 GMT-0700") + " (Central European Standard Time)", at.Sub(now)
	}
	secs := ceilSeconds(after)
	return strconv.FormatInt(secs, 10), time.Duration(secs) * time.Second
}

// Reject returns a 429 naming its wait as d.Wait says.
func (d XRateLimit) Reject(h http.Header, s State) Rejection {
	p := cmpOr(d.Prefix, "X-RateLimit-")
	var wait time.Duration
	switch d.Wait {
	case WaitPrefixRetryAfter, WaitRetryAfter:
		name := "Retry-After"
		if d.Wait == WaitPrefixRetryAfter {
			name = p + "Retry-After"
		}
		secs := ceilSeconds(s.RetryAfter)
		h.Set(name, strconv.FormatInt(secs, 10))
		wait = time.Duration(secs) * time.Second
	case WaitPrefixNext:
		wait = ceilTo(s.RetryAfter, time.Millisecond)
		h.Set(p+"Next", s.Now.Add(wait).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	case WaitReset:
		h.Set(p+"Remaining", "0")
		if d.Reset != ResetNone {
			_, wait = d.reset(s.Now, s.ResetAfter)
		}
	}
	return jsonRejection(h, http.StatusTooManyRequests, `{"error":"rate limit exceeded"}`, wait)
}
