package headway

import (
	"net/http"
	"strings"
	"time"
)

// xRateLimitDialect reads the X-RateLimit-* family that most APIs send,
// in every spelling seen in the wild:
//
//   - X-RateLimit-Limit, -Remaining, -Reset (GitHub, Discord, Reddit,
//     Atlassian, and countless others); X-Rate-Limit-* (Okta, Twitter/X,
//     Zendesk's X-Rate-Limit). Reset may be a delta in seconds, an epoch in
//     seconds with or without a fraction, an epoch in milliseconds, an
//     RFC 3339 timestamp or an HTTP-date; see parseReset. A remaining count
//     may be a decimal (Reddit's 599.0).
//   - X-RateLimit-Reset-After, Discord's precise delta, preferred to Reset.
//   - X-RateLimit-Bucket (Discord) and X-RateLimit-Resource (GitHub) as the
//     signal's Bucket.
//   - OpenAI's X-RateLimit-{Limit,Remaining,Reset}-{Requests,Tokens}, resets
//     as Go durations ("6m0s", "547ms").
//   - Kong's X-RateLimit-{Limit,Remaining}-{Second,Minute,Hour,Day,Month,Year},
//     whose suffix states the window.
//
// A field sent on several lines takes its most conservative value: the
// fewest remaining, the smallest limit, the latest reset.
type xRateLimitDialect struct{}

func (xRateLimitDialect) String() string { return "x-ratelimit" }

// window accumulates the fields of one rate-limit window.
type window struct {
	limit, remaining         int64
	reset                    time.Duration
	hasLimit, hasRem, hasRst bool
}

func (w *window) addLimit(vs []string) {
	if n, ok := minCount(vs); ok && (!w.hasLimit || n < w.limit) {
		w.limit, w.hasLimit = n, true
	}
}

func (w *window) addRemaining(vs []string) {
	if n, ok := minCount(vs); ok && (!w.hasRem || n < w.remaining) {
		w.remaining, w.hasRem = n, true
	}
}

func (w *window) addReset(d time.Duration, ok bool) {
	if ok && (!w.hasRst || d > w.reset) {
		w.reset, w.hasRst = d, true
	}
}

// add records the window in s if its remaining count is known.
func (w *window) add(s *Signal, period time.Duration, unit string) {
	if w.hasRem {
		s.AddQuota(Quota{Remaining: w.remaining, Reset: w.reset, Limit: w.limit, Period: period, Unit: unit})
	}
}

// kongPeriods are the window suffixes of Kong's rate-limiting plugin.
var kongPeriods = [...]struct {
	name   string
	period time.Duration
}{
	{"Second", time.Second},
	{"Minute", time.Minute},
	{"Hour", time.Hour},
	{"Day", 24 * time.Hour},
	{"Month", 30 * 24 * time.Hour},
	{"Year", 365 * 24 * time.Hour},
}

func (xRateLimitDialect) Parse(in *SignalInput, s *Signal) {
	if !in.has(famXRateLimit) {
		return
	}
	var (
		plain, after window
		requests     window // OpenAI
		tokens       window
		kong         [len(kongPeriods)]window
	)
	for k, vs := range in.Header {
		var rest string
		switch {
		case strings.HasPrefix(k, "X-Ratelimit-"):
			rest = k[len("X-Ratelimit-"):]
		case strings.HasPrefix(k, "X-Rate-Limit-"):
			rest = k[len("X-Rate-Limit-"):]
		case k == "X-Rate-Limit": // Zendesk
			rest = "Limit"
		default:
			continue
		}
		switch rest {
		case "Limit":
			plain.addLimit(vs)
		case "Remaining":
			plain.addRemaining(vs)
		case "Reset":
			plain.addReset(maxReset(vs, in))
		case "Reset-After":
			after.addReset(maxOf(vs, parseSeconds))
		case "Bucket", "Resource":
			if s.Bucket == "" && len(vs) > 0 {
				s.Bucket = trimOWS(vs[0])
			}
		case "Limit-Requests":
			requests.addLimit(vs)
		case "Remaining-Requests":
			requests.addRemaining(vs)
		case "Reset-Requests":
			requests.addReset(maxOf(vs, parseGoDuration))
		case "Limit-Tokens":
			tokens.addLimit(vs)
		case "Remaining-Tokens":
			tokens.addRemaining(vs)
		case "Reset-Tokens":
			tokens.addReset(maxOf(vs, parseGoDuration))
		default:
			field, suffix, ok := strings.Cut(rest, "-")
			if !ok {
				continue
			}
			for i, p := range kongPeriods {
				if suffix == p.name {
					switch field {
					case "Limit":
						kong[i].addLimit(vs)
					case "Remaining":
						kong[i].addRemaining(vs)
					}
				}
			}
		}
	}
	if after.hasRst {
		plain.reset, plain.hasRst = after.reset, true
	}
	plain.add(s, 0, "")
	requests.add(s, 0, "")
	tokens.add(s, 0, "tokens")
	for i := range kong {
		kong[i].add(s, kongPeriods[i].period, "")
	}
}

// githubDialect recognises GitHub's rate limits among its 403s: a primary
// limit answers 403 with x-ratelimit-remaining: 0, a secondary limit 403 with
// retry-after (read before the dialects run) or a message saying so. Any
// other 403 is not a rate limit. A secondary limit without retry-after waits
// the one minute GitHub's documentation asks for.
type githubDialect struct{}

func (githubDialect) String() string { return "github" }

func (githubDialect) Parse(in *SignalInput, s *Signal) {
	if in.Status != http.StatusForbidden {
		return
	}
	exhausted := false
	for _, v := range in.Header["X-Ratelimit-Remaining"] {
		if n, ok := parseCount(v); ok && n == 0 {
			exhausted = true
		}
	}
	secondary := containsFold(in.Body, "exceeded a secondary rate limit")
	if exhausted || secondary || containsFold(in.Body, "rate limit exceeded") {
		s.Throttled = true
	}
	if secondary && !s.HasWait {
		s.AddRetryAfter(time.Minute)
	}
}

// discordDialect reads Discord's scope (X-RateLimit-Global: true,
// X-RateLimit-Scope: global) and the JSON body of its 429s: a precise
// retry_after in seconds (Telegram sends one too) and "global": true.
type discordDialect struct{}

func (discordDialect) String() string { return "discord" }

func (discordDialect) Parse(in *SignalInput, s *Signal) {
	if in.has(famXRateLimit) {
		for _, v := range in.Header["X-Ratelimit-Global"] {
			if strings.EqualFold(trimOWS(v), "true") {
				s.Scope = ScopeGlobal
			}
		}
		for _, v := range in.Header["X-Ratelimit-Scope"] {
			if strings.EqualFold(trimOWS(v), "global") {
				s.Scope = ScopeGlobal
			}
		}
	}
	if in.Status != http.StatusTooManyRequests || len(in.Body) == 0 {
		return
	}
	if v, isString, ok := jsonValue(in.Body, "retry_after"); ok && !isString {
		if n, frac, ok := parseNumber(string(v)); ok {
			s.refineRetryAfter(toDuration(n, frac, time.Second))
		}
	}
	if v, isString, ok := jsonValue(in.Body, "global"); ok && !isString && string(v) == "true" {
		s.Scope = ScopeGlobal
	}
}

// openAIDialect recognises a billing error that OpenAI (and Azure OpenAI)
// answer with a 429: "insufficient_quota" or "billing_hard_limit_reached" as
// the error's type or code. Waiting does not cure it: not retryable.
type openAIDialect struct{}

func (openAIDialect) String() string { return "openai" }

func (openAIDialect) Parse(in *SignalInput, s *Signal) {
	if in.Status != http.StatusTooManyRequests || len(in.Body) == 0 {
		return
	}
	for _, key := range [...]string{"code", "type"} {
		if v, isString, ok := jsonValue(in.Body, key); ok && isString {
			if c := string(v); c == "insufficient_quota" || c == "billing_hard_limit_reached" {
				s.Retryable = false
			}
		}
	}
}

// anthropicDialect reads anthropic-ratelimit-{requests,tokens,input-tokens,
// output-tokens}-{limit,remaining,reset}, resets as RFC 3339 timestamps.
type anthropicDialect struct{}

func (anthropicDialect) String() string { return "anthropic" }

var anthropicKinds = [...]string{"Requests", "Tokens", "Input-Tokens", "Output-Tokens"}

func (anthropicDialect) Parse(in *SignalInput, s *Signal) {
	if !in.has(famAnthropic) {
		return
	}
	var ws [len(anthropicKinds)]window
	for k, vs := range in.Header {
		rest, ok := strings.CutPrefix(k, "Anthropic-Ratelimit-")
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, '-')
		if i < 0 {
			continue
		}
		kind, field := rest[:i], rest[i+1:]
		for j, name := range anthropicKinds {
			if kind != name {
				continue
			}
			switch field {
			case "Limit":
				ws[j].addLimit(vs)
			case "Remaining":
				ws[j].addRemaining(vs)
			case "Reset":
				ws[j].addReset(maxReset(vs, in))
			}
		}
	}
	ws[0].add(s, 0, "")
	for i := 1; i < len(ws); i++ {
		ws[i].add(s, 0, "tokens")
	}
}

// shopifyDialect reads X-Shopify-Shop-Api-Call-Limit: used/capacity of
// Shopify's leaky bucket ("32/40" leaves 8).
type shopifyDialect struct{}

func (shopifyDialect) String() string { return "shopify" }

func (shopifyDialect) Parse(in *SignalInput, s *Signal) {
	if !in.has(famShopify) {
		return
	}
	var w window
	for _, v := range in.Header["X-Shopify-Shop-Api-Call-Limit"] {
		used, capacity, ok := strings.Cut(v, "/")
		if !ok {
			continue
		}
		u, ok1 := parseCount(used)
		c, ok2 := parseCount(capacity)
		if !ok1 || !ok2 {
			continue
		}
		if r := max(c-u, 0); !w.hasRem || r < w.remaining {
			w.remaining, w.limit, w.hasRem, w.hasLimit = r, c, true, true
		}
	}
	w.add(s, 0, "")
}

// hubSpotDialect reads X-HubSpot-RateLimit-*: the burst window (-Max,
// -Remaining over -Interval-Milliseconds), the per-second window
// (-Secondly, -Secondly-Remaining) and the daily one (-Daily,
// -Daily-Remaining).
type hubSpotDialect struct{}

func (hubSpotDialect) String() string { return "hubspot" }

func (hubSpotDialect) Parse(in *SignalInput, s *Signal) {
	if !in.has(famHubSpot) {
		return
	}
	h := in.Header
	var burst, secondly, daily window
	burst.addLimit(h["X-Hubspot-Ratelimit-Max"])
	burst.addRemaining(h["X-Hubspot-Ratelimit-Remaining"])
	interval, _ := maxOf(h["X-Hubspot-Ratelimit-Interval-Milliseconds"], parseMillis)
	secondly.addLimit(h["X-Hubspot-Ratelimit-Secondly"])
	secondly.addRemaining(h["X-Hubspot-Ratelimit-Secondly-Remaining"])
	daily.addLimit(h["X-Hubspot-Ratelimit-Daily"])
	daily.addRemaining(h["X-Hubspot-Ratelimit-Daily-Remaining"])
	burst.add(s, interval, "")
	secondly.add(s, time.Second, "")
	daily.add(s, 24*time.Hour, "")
}

// zendeskDialect reads Zendesk's per-endpoint fields such as
// Zendesk-RateLimit-Tickets-Index: total=100; remaining=99; resets=41. Its
// account-wide limit comes as X-Rate-Limit and the IETF -06 fields, read by
// the other dialects.
type zendeskDialect struct{}

func (zendeskDialect) String() string { return "zendesk" }

func (zendeskDialect) Parse(in *SignalInput, s *Signal) {
	if !in.has(famZendesk) {
		return
	}
	for k, vs := range in.Header {
		if !strings.HasPrefix(k, "Zendesk-Ratelimit-") {
			continue
		}
		for _, v := range vs {
			var w window
			for part := range strings.FieldsFuncSeq(v, func(r rune) bool { return r == ';' || r == ',' }) {
				key, val, ok := strings.Cut(part, "=")
				if !ok {
					continue
				}
				switch trimOWS(key) {
				case "total":
					w.addLimit([]string{val})
				case "remaining":
					w.addRemaining([]string{val})
				case "resets":
					w.addReset(parseSeconds(val))
				}
			}
			w.add(s, 0, "")
		}
	}
}

// stripeDialect reads Stripe-Should-Retry: false, Stripe's word that a
// request must not be retried. (Stripe's 429s carry no other signal.)
type stripeDialect struct{}

func (stripeDialect) String() string { return "stripe" }

func (stripeDialect) Parse(in *SignalInput, s *Signal) {
	if !in.has(famStripe) {
		return
	}
	for _, v := range in.Header["Stripe-Should-Retry"] {
		if strings.EqualFold(trimOWS(v), "false") {
			s.Retryable = false
		}
	}
}

// minCount returns the smallest valid count among the lines of a field.
func minCount(vs []string) (int64, bool) {
	var m int64
	found := false
	for _, v := range vs {
		if n, ok := parseCount(v); ok && (!found || n < m) {
			m, found = n, true
		}
	}
	return m, found
}

// maxReset returns the latest valid reset among the lines of a field.
func maxReset(vs []string, in *SignalInput) (time.Duration, bool) {
	var m time.Duration
	found := false
	for _, v := range vs {
		if d, ok := parseReset(v, in); ok && (!found || d > m) {
			m, found = d, true
		}
	}
	return m, found
}

// maxOf returns the longest valid duration among the lines of a field.
func maxOf(vs []string, parse func(string) (time.Duration, bool)) (time.Duration, bool) {
	var m time.Duration
	found := false
	for _, v := range vs {
		if d, ok := parse(v); ok && (!found || d > m) {
			m, found = d, true
		}
	}
	return m, found
}

// parseSeconds parses a non-negative decimal number of seconds.
func parseSeconds(v string) (time.Duration, bool) {
	n, frac, ok := parseNumber(v)
	return toDuration(n, frac, time.Second), ok
}

// parseMillis parses a non-negative decimal number of milliseconds.
func parseMillis(v string) (time.Duration, bool) {
	n, frac, ok := parseNumber(v)
	return toDuration(n, frac, time.Millisecond), ok
}
