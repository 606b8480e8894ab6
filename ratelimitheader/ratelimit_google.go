package ratelimitheader

import (
	"net/http"
	"strings"
	"time"
)

// googleDialect reads the errors of Google APIs (google.rpc.Status as JSON),
// Gemini's among them, which name their wait only in the body:
//
//	{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
//	  {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
//	    {"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "quotaValue": "10"}]},
//	  {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "55s"}]}}
//
// RetryInfo's retryDelay (a protobuf Duration: "55s", "0.5s",
// "1.000340s") is a stated delay, as Retry-After is. QuotaFailure's quotaId
// names the quota; for a request quota whose id names its window
// (PerMinute, PerDay, ...), its quotaValue is the limit. (The quotaId is
// not the signal's Bucket: only a rejection names it, and a Bucket is a
// name every response of the bucket gives.)
// The older APIs' 403 with the reason rateLimitExceeded or
// userRateLimitExceeded (Drive, Calendar, YouTube) is a rate limit too.
type googleDialect struct{}

func (googleDialect) String() string { return "google" }

// Parse reads in into s (see Dialect).
func (d googleDialect) Parse(in *Input, s *Signal) { d.parse(newInput(in), s) }

func (googleDialect) parse(in *input, s *Signal) {
	if len(in.Body) == 0 {
		return
	}
	switch in.Status {
	case http.StatusForbidden:
		if v, isString, ok := jsonValue(in.Body, "reason"); ok && isString {
			if r := string(v); r == "rateLimitExceeded" || r == "userRateLimitExceeded" || r == "RATE_LIMIT_EXCEEDED" {
				s.Throttled = true
			}
		}
		if !s.Throttled {
			return
		}
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
	default:
		return
	}
	if v, isString, ok := jsonValue(in.Body, "retryDelay"); ok && isString {
		if d, ok := parseProtoDuration(string(v)); ok {
			s.refineRetryAfter(d)
		}
	}
	id, isString, ok := jsonValue(in.Body, "quotaId")
	if !ok || !isString || len(id) == 0 || len(id) > 128 {
		return
	}
	if !containsFold(id, "requests") {
		return
	}
	for _, p := range [...]struct {
		name   string
		period time.Duration
	}{{"persecond", time.Second}, {"perminute", time.Minute}, {"perhour", time.Hour}, {"perday", 24 * time.Hour}} {
		if containsFold(id, p.name) {
			if v, _, ok := jsonValue(in.Body, "quotaValue"); ok && s.Limit == 0 {
				if n, ok := parseCount(string(v)); ok && n > 0 {
					s.Limit, s.Period = n, p.period
				}
			}
			return
		}
	}
}

// parseProtoDuration parses a protobuf Duration as JSON writes it: seconds
// with up to nine decimals and an "s" ("55s", "0.5s"). Signs are invalid.
func parseProtoDuration(v string) (time.Duration, bool) {
	v, ok := strings.CutSuffix(trimOWS(v), "s")
	if !ok {
		return 0, false
	}
	return parseSeconds(v)
}
