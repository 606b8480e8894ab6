package fakeserver

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// IETF is the dialect of draft-ietf-httpapi-ratelimit-headers-11: every
// response carries the policy and the quota left, as Structured Fields,
//
//	RateLimit-Policy: "default";q=50;w=1
//	RateLimit: "default";r=3;t=1
//
// where q is Limit, w is Window in seconds, r is the remaining quota and t
// the seconds until it is restored in full (rounded up). A rejection is a
// 429 with Retry-After in whole seconds, rounded up.
type IETF struct {
	// Policy is the name of the quota policy. Empty means "default".
	Policy string
}

// Header adds RateLimit-Policy and RateLimit.
func (d IETF) Header(h http.Header, s State) {
	name := sfString(cmpOr(d.Policy, "default"))
	h.Set("RateLimit-Policy", name+";q="+strconv.Itoa(s.Limit)+";w="+strconv.FormatInt(ceilSeconds(s.Window), 10))
	h.Set("RateLimit", name+";r="+strconv.Itoa(s.Remaining)+";t="+strconv.FormatInt(ceilSeconds(s.ResetAfter), 10))
}

// Reject returns a 429 with Retry-After in seconds.
func (IETF) Reject(h http.Header, s State) Rejection {
	return RetryAfterSeconds{}.Reject(h, s)
}

// IETF06 is the dialect of draft-ietf-httpapi-ratelimit-headers-06 and of
// many gateways (Kong, Envoy): three separate fields,
//
//	RateLimit-Limit: 10
//	RateLimit-Remaining: 3
//	RateLimit-Reset: 7
//
// where Limit is the capacity (Burst for the buckets), Remaining the quota
// left and Reset the seconds until it is restored in full, rounded up. A
// rejection is a 429 with Retry-After in whole seconds, rounded up. The
// fields vary it the ways servers do.
type IETF06 struct {
	// EpochReset sends Reset as the Unix time, in whole seconds on the
	// server's clock and rounded up, of the full quota (GitLab's shape).
	EpochReset bool
	// NoLimit leaves RateLimit-Limit out.
	NoLimit bool
	// NoRetryAfter rejects with a bare 429: the client has only Remaining
	// and Reset to go by.
	NoRetryAfter bool
}

// Header adds RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset.
func (d IETF06) Header(h http.Header, s State) {
	if !d.NoLimit {
		h.Set("RateLimit-Limit", strconv.Itoa(s.Capacity))
	}
	h.Set("RateLimit-Remaining", strconv.Itoa(s.Remaining))
	if d.EpochReset {
		h.Set("RateLimit-Reset", strconv.FormatInt(ceilTime(s.Now.Add(s.ResetAfter)).Unix(), 10))
	} else {
		h.Set("RateLimit-Reset", strconv.FormatInt(ceilSeconds(s.ResetAfter), 10))
	}
}

// Reject returns a 429 with Retry-After in seconds, or a bare one with
// NoRetryAfter.
func (d IETF06) Reject(h http.Header, s State) Rejection {
	if d.NoRetryAfter {
		// The client learns the wait from the reset, rounded as it is sent.
		wait := time.Duration(ceilSeconds(s.ResetAfter)) * time.Second
		if d.EpochReset {
			wait = ceilTime(s.Now.Add(s.ResetAfter)).Sub(s.Now)
		}
		if s.Remaining > 0 || s.NextAfter < s.ResetAfter {
			wait = s.RetryAfter // a bucket: one request comes back sooner
		}
		return jsonRejection(h, http.StatusTooManyRequests, `{"error":"too many requests"}`, wait)
	}
	return RetryAfterSeconds{}.Reject(h, s)
}

// sfString returns s as a Structured Field string (RFC 9651 3.3.3),
// dropping the characters a string may not hold.
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range []byte(s) {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
