package ratelimitheader

import (
	"net/http"
	"net/textproto"
	"strings"
	"time"
)

// Signal is what one HTTP response said about rate limiting: whether it
// rejected the request, how long to wait before the next request on the same
// key, and what quota is left. The zero value says nothing at all.
//
// Durations are measured from the moment the response was received and are
// never negative.
type Signal struct {
	// Throttled reports that the response rejected the request because of a
	// rate limit or an overload: every 429, 503 and 529, a 403 that states a
	// delay or that a dialect recognises as a rate limit (GitHub, Salesforce,
	// Google), a 418 that states a delay (Binance's ban of an address, which
	// applies to every key of the host: ScopeGlobal), and Linear's 400
	// RATELIMITED. A 429 that a
	// dialect recognises as contention on one object rather than the key's
	// rate (Stripe's lock_timeout, Atlassian's per-issue write limit) is not
	// throttled: it is retried as any 429 is, without slowing the key down.
	// A 200 that spends the last of a quota is not throttled, though it may
	// carry a Wait.
	Throttled bool

	// Permanent reports a rejection that does not pass with time, such as a
	// billing quota answered with a 429 ("insufficient_quota"): the request
	// should not be retried at all. False, the zero value, leaves retrying
	// to the status and the other fields.
	Permanent bool

	// Scope says whether a pause applies to the key only (ScopeKey, the
	// default) or to every key of the host (ScopeGlobal).
	Scope Scope

	// Wait is the least time before the next request on the key may go out.
	// It is meaningful only when HasWait is true.
	Wait time.Duration

	// HasWait reports that the response named a usable delay: a Retry-After
	// (or a vendor's equivalent), or the reset of an exhausted quota. When a
	// throttled response has no wait, the client falls back to its own
	// backoff.
	HasWait bool

	// RetryAfter reports that Wait was stated outright as a delay
	// (Retry-After, retry-after-ms, a body's retry_after) rather than derived
	// from a quota's reset. A stated delay takes precedence over every other
	// signal.
	RetryAfter bool

	// OverMaxServerWait reports that the wait is longer than the parser's
	// MaxServerWait: too long to sleep on, so the client should hand the
	// response back at once. A stated delay (RetryAfter) is over beyond
	// MaxServerWait. A wait a throttled response derives from a quota's reset
	// is the provider's window, not a suspect number, and is over only beyond
	// both MaxServerWait and an hour: GitHub's hourly window is slept through,
	// a spent daily quota is not. Wait still holds the delay, saturated
	// rather than overflowed.
	OverMaxServerWait bool

	// Remaining is the number of requests left in the tightest window the
	// response described: the one with the fewest requests left, and of
	// those the one that resets last (see AddQuota). It is meaningful only
	// when HasRemaining is true.
	Remaining int64

	// HasRemaining reports that the response stated a usable remaining
	// request quota. Malformed, cached or absent fields leave it false.
	HasRemaining bool

	// Reset is the time until the Remaining quota refills; zero when unknown.
	Reset time.Duration

	// Limit is the stated size of the quota Remaining belongs to, and Period
	// the length of its window: Limit requests per Period. Either is zero
	// when the response did not state it.
	Limit  int64
	Period time.Duration

	// MillisecondDelay reports that the stated delay (RetryAfter) was a
	// bare whole number read in milliseconds: the response showed it (a
	// spent window's reset beside it, as Discord's before API v8 and
	// PluralKit's; see the discord dialect), or Input.MillisecondDelays
	// said so. A server states its delays alike: a client may set
	// Input.MillisecondDelays for its later responses, whose delays may
	// come without a window to show it (Discord's global limit).
	MillisecondDelay bool

	// Bucket is the vendor's name for the limit the response counted
	// against, where every response of that limit gives it: Discord's
	// X-RateLimit-Bucket, GitHub's x-ratelimit-resource, Datadog's
	// X-RateLimit-Name, the name in Trakt's X-Ratelimit, an IETF limit's
	// partition key ("name;pk=:...:"). Reasons only a rejection gives
	// (Atlassian's RateLimit-Reason, Stripe-Rate-Limited-Reason, Google's
	// quotaId) are not Buckets.
	Bucket string
}

// Scope says which requests a pause applies to.
type Scope uint8

const (
	// ScopeKey means the signal applies to the key the request was sent on.
	ScopeKey Scope = iota
	// ScopeGlobal means the signal applies to every key of the credential
	// on the host, as Discord's global rate limit (per bot token) and
	// LaunchDarkly's (per account, across routes) do, or
	// to every key of the host, as a ban of the client's address does
	// (Binance's 418).
	ScopeGlobal
)

// String returns "key" or "global".
func (s Scope) String() string {
	if s == ScopeGlobal {
		return "global"
	}
	return "key"
}

// Quota is one rate-limit window as a response describes it, handed to
// Signal.AddQuota by a Dialect.
type Quota struct {
	// Remaining is what is left of the quota; negative values are ignored.
	Remaining int64
	// Reset is the time until Remaining refills; zero when unknown.
	Reset time.Duration
	// Limit and Period are the quota's size and window; zero when unknown.
	Limit  int64
	Period time.Duration
	// Unit is what the quota counts. "" and "requests" count requests; any
	// other unit ("tokens", "content-bytes") still governs the wait when
	// exhausted, but is not reported as Signal.Remaining.
	Unit string
}

// AddRetryAfter records a delay the response stated outright. It replaces
// any wait derived from a quota; of several stated delays the longest wins.
// A negative d counts as zero.
func (s *Signal) AddRetryAfter(d time.Duration) {
	d = max(d, 0)
	if !s.RetryAfter || d > s.Wait {
		s.Wait = d
	}
	s.RetryAfter, s.HasWait = true, true
}

// refineRetryAfter records a finer-grained statement of a delay already given
// in whole seconds (x-ms-retry-after-ms, Discord's fractional retry_after). It
// replaces a stated delay it agrees with to within a second, and otherwise
// keeps the longer of the two.
func (s *Signal) refineRetryAfter(d time.Duration) {
	d = max(d, 0)
	if !s.RetryAfter || d > s.Wait-time.Second {
		s.Wait = d
	}
	s.RetryAfter, s.HasWait = true, true
}

// AddQuota records one rate-limit window. An exhausted window (Remaining 0)
// with a known Reset sets the wait, unless a stated delay already did; of
// several exhausted windows the one that resets last governs. A request window
// becomes the signal's Remaining, Reset, Limit and Period when it binds more
// than the one recorded so far (see binds): fewer requests left or, on a
// tie, a later reset. Two windows with as many requests left and no conflicting
// Limit or Period are taken for one window described twice, and complete
// each other.
func (s *Signal) AddQuota(q Quota) {
	if q.Remaining < 0 {
		return
	}
	q.Reset, q.Limit, q.Period = max(q.Reset, 0), max(q.Limit, 0), max(q.Period, 0)
	if q.Remaining == 0 && q.Reset > 0 && !s.RetryAfter && (!s.HasWait || q.Reset > s.Wait) {
		s.Wait, s.HasWait = q.Reset, true
	}
	if !isRequests(q.Unit) {
		return
	}
	switch {
	case !s.HasRemaining:
	case q.Remaining == s.Remaining && compatible(s.Limit, q.Limit) && compatible(int64(s.Period), int64(q.Period)):
		// Likely one window described twice (Kong sends RateLimit-* and
		// X-RateLimit-*-Minute): let each description complete the other.
		s.Reset = max(s.Reset, q.Reset)
		if s.Limit == 0 {
			s.Limit = q.Limit
		}
		if s.Period == 0 {
			s.Period = q.Period
		}
		return
	case !binds(q.Remaining, q.Reset, s.Remaining, s.Reset):
		return
	}
	s.Remaining, s.HasRemaining, s.Reset, s.Limit, s.Period = q.Remaining, true, q.Reset, q.Limit, q.Period
}

// compatible reports whether two statements of a window's size or length
// may describe the same window: equal, or one of them unknown (zero).
func compatible(a, b int64) bool { return a == 0 || b == 0 || a == b }

// binds reports whether window a (ra requests left, resetting after
// reseta) binds more than window b: it has fewer requests left, or as many
// and resets later. The fewest left is what a client may spend at once
// without going over any of the windows, whatever their lengths (3 left of
// a minute's 10 and 57 of an hour's 100: spending the hour's 57 at once
// overruns the minute); the responses that follow state the rest.
func binds(ra int64, reseta time.Duration, rb int64, resetb time.Duration) bool {
	if ra != rb {
		return ra < rb
	}
	return reseta > resetb
}

// Input is the part of an HTTP response that signal parsing reads,
// together with the clocks to measure it against.
type Input struct {
	// Status is the response's status code.
	Status int
	// Header is the response's header. Keys are expected in canonical form,
	// as net/http delivers them; other keys are canonicalised at some cost.
	Header http.Header
	// Body is at most a small prefix of the response body (a few KiB), for
	// non-2xx responses only. It may be truncated anywhere.
	Body []byte
	// Now is the local time at which the response was received. Zero means
	// time.Now().
	Now time.Time
	// ServerNow, when not zero, is the best estimate of the server's clock at
	// receipt, for instance Now plus an offset learned from many responses.
	// When zero, the response's Date header stands in for it, and Now when
	// there is no valid Date.
	ServerNow time.Time
	// MillisecondResets, when set, says that the server's bare resets count
	// milliseconds, as earlier responses of the same server showed (see
	// ResetsFall): a reset of the X-RateLimit family stated as a whole
	// number below 1e8, which a single response leaves to read in seconds,
	// is read in milliseconds. Epochs, fractions and resets whose field
	// says its unit are read as always.
	MillisecondResets bool
	// MillisecondDelays, when set, says that the server's bare delays count
	// milliseconds, as an earlier response of the same server showed (see
	// Signal.MillisecondDelay): a 429's Retry-After and the delay its body
	// states (retry_after, retry-after) are read in milliseconds when they
	// are whole numbers. A delay with a fraction is read in seconds, as
	// always, and a longer one it states beside them wins.
	MillisecondDelays bool
}

// ResetsFall reports whether a reset read from a response, prev, and one
// read from a later response of the same window, next, elapsed apart,
// show resets that count milliseconds read as seconds: the delta fell about
// a thousand times faster than the clock (to within a quarter of elapsed,
// and as much again up to 20 ms for the latency of each answer), and by
// more than a reset in seconds can fall in that time. A reset in seconds,
// a delta or an epoch, falls as fast as the clock, and a window that turns
// resets later: none falls faster. A client that sees it for a server's
// resets, more than once to rule out a glitch (replicas whose clocks
// differ by seconds), sets Input.MillisecondResets for its responses from
// then on.
func ResetsFall(prev, next, elapsed time.Duration) bool {
	if elapsed <= 0 || next <= 0 || prev <= next || elapsed > maxPeriod {
		return false
	}
	fell := prev - next // a thousandth of it in milliseconds, if they count them
	if fell <= elapsed+2*time.Second {
		return false
	}
	ms := fell / 1000
	slack := elapsed/4 + min(elapsed, 20*time.Millisecond)
	return ms >= elapsed-slack && ms <= elapsed+slack
}

// ServerTime returns the server's clock at receipt against which absolute
// times in the response (HTTP dates, epoch resets) are measured: ServerNow if
// set, else the response's Date header if it is within 30 days of Now (a
// Date further off is taken as broken), else Now.
func (in *Input) ServerTime() time.Time {
	t, _ := in.serverClock()
	return t
}

// serverClock returns ServerTime, and whether the response told the
// server's clock (ServerNow is set, or the Date is valid) rather than the
// local clock standing in for it.
func (in *Input) serverClock() (time.Time, bool) {
	if !in.ServerNow.IsZero() {
		return in.ServerNow, true
	}
	now := in.now()
	if t, ok := dateOf(in.Header, now); ok {
		return t, true
	}
	return now, false
}

// input is the working copy of an Input that a parse hands to the built-in
// dialects: the header families present, found once by scanHeader, and the
// server time, found once when first asked.
type input struct {
	Input
	fam      family
	srv      time.Time
	srvKnown bool // srv is the server's clock (ServerNow, a valid Date), not Now
	srvDone  bool
	// spent is the latest reset of an X-RateLimit window the response says
	// is exhausted, and hasSpent whether there is one: the X-RateLimit
	// dialect notes it for the body's delay to be measured against (see
	// bodyDelay).
	spent    time.Duration
	hasSpent bool
}

// newInput returns the working copy of in, for a built-in dialect called
// on its own.
func newInput(in *Input) *input {
	w := &input{Input: *in, fam: scanHeader(in.Header)}
	if w.fam&famNonCanonical != 0 {
		w.Header = canonicalHeader(in.Header)
	}
	return w
}

// ServerTime is Input.ServerTime, found once per parse.
func (in *input) ServerTime() time.Time {
	t, _ := in.serverClock()
	return t
}

// serverClock is Input.serverClock, found once per parse.
func (in *input) serverClock() (time.Time, bool) {
	if !in.srvDone {
		in.srv, in.srvKnown = in.Input.serverClock()
		in.srvDone = true
	}
	return in.srv, in.srvKnown
}

// dateOf returns the Date in h if it has a valid one, within maxDateSkew
// of now.
func dateOf(h http.Header, now time.Time) (time.Time, bool) {
	if v := h["Date"]; len(v) > 0 {
		if t, ok := parseHTTPDate(v[0]); ok && saneDate(t, now) {
			return t, true
		}
		// Folded by a proxy into one line, or sent twice: the first valid.
		var b [2]string
		for _, item := range fieldItems(b[:0], v) {
			if t, ok := parseHTTPDate(item); ok && saneDate(t, now) {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

// maxDateSkew is how far a response's Date may be from the local clock and
// still be taken for the server's clock: further off, it is broken (a Date
// of 1970 or 9999), and absolute times are measured against the local
// clock instead. A server whose clock is wrong by hours or days usually
// writes its absolute resets by the same clock, so they are measured
// against its Date as long as it is within a month.
const maxDateSkew = 30 * 24 * time.Hour

// saneDate reports whether date, a response's Date, is within maxDateSkew
// of now.
func saneDate(date, now time.Time) bool {
	d := date.Sub(now)
	return d <= maxDateSkew && d >= -maxDateSkew
}

func (in *Input) now() time.Time {
	if in.Now.IsZero() {
		return time.Now()
	}
	return in.Now
}

// has reports whether the header holds a field of the family f.
func (in *input) has(f family) bool { return in.fam&f != 0 }

// Dialect reads one family of rate-limit fields. Parse inspects the input and
// records what it finds in s, typically with s.AddQuota and s.AddRetryAfter,
// or by setting s.Throttled, s.Permanent, s.Scope or s.Bucket. It must not
// keep in or s, and must tolerate any input without panicking.
type Dialect interface {
	Parse(in *Input, s *Signal)
}

// DialectFunc adapts a function to the Dialect interface.
type DialectFunc func(in *Input, s *Signal)

// Parse calls f(in, s).
func (f DialectFunc) Parse(in *Input, s *Signal) { f(in, s) }

// defaultMaxWait is Parser.MaxServerWait's and WithMaxServerWait's
// default.
const defaultMaxWait = 10 * time.Minute

// statusOverloaded is the status some APIs answer an overload with
// (Anthropic's overloaded_error, Notion's): a throttle like 503.
const statusOverloaded = 529

// builtinDialects is the default ordered list; see DefaultDialects.
var builtinDialects = []Dialect{
	ietfDialect{},
	xRateLimitDialect{},
	githubDialect{},
	discordDialect{},
	openAIDialect{},
	anthropicDialect{},
	shopifyDialect{},
	hubSpotDialect{},
	zendeskDialect{},
	stripeDialect{},
	googleDialect{},
	salesforceDialect{},
	atlassianDialect{},
	linearDialect{},
	quotaLimitDialect{},
}

// DefaultDialects returns a new slice of the built-in dialects, in the order
// Parse runs them: IETF RateLimit (drafts -06 to -11), X-RateLimit-*
// (GitHub, Discord, Reddit, OpenAI, Kong, Okta, Twitter/X, Atlassian,
// Linear, RapidAPI, Strava, Trello, Azure, Datadog, Riot Games,
// LaunchDarkly, Trakt, Split, Bybit, and the windows Etsy and Xero name),
// GitHub's 403, Discord's body (and the delays other
// bodies state, in seconds or in milliseconds: PluralKit's, Discord's
// before v8, Zulip's retry-after, Mailgun's retry-seconds, Matrix's
// retry_after_ms), OpenAI's billing
// errors, Anthropic, Shopify, HubSpot, Zendesk, Stripe, Google APIs
// (Gemini's RetryInfo), Salesforce, Atlassian's RateLimit-Reason and
// Linear's 400 RATELIMITED, and the <vendor>-Quota-Limit fields' windows
// (Auth0's token quotas). Append your own to add a vendor. Each built-in
// dialect prints its name with fmt.
func DefaultDialects() []Dialect {
	return append([]Dialect(nil), builtinDialects...)
}

// Parser turns responses into Signals. The zero value is ready to use
// and equivalent to Parse. A Parser is safe for concurrent use as
// long as its fields are not changed.
type Parser struct {
	// Dialects are run in order on every response that may carry a signal.
	// Nil means DefaultDialects(); an empty non-nil slice runs none (only
	// Retry-After and the status code are read). With a non-nil list every
	// response goes through the dialects, even one with no rate-limit field.
	Dialects []Dialect

	// MaxServerWait is the longest wait a server names that is worth
	// sleeping on; a longer one sets Signal.OverMaxServerWait. Zero or a
	// negative value means 10 minutes.
	MaxServerWait time.Duration
}

// Parse reads what a response said about rate limiting, with the
// default dialects. See Parser.Parse.
func Parse(in *Input) Signal {
	var p Parser
	return p.Parse(in)
}

// Parse reads what the response described by in said about rate limiting.
//
// 429, 503 and 529 are throttled even without any header; a 403 is throttled
// only when it states a delay or a dialect recognises a rate limit in it, a
// 418 only when it states a delay (see Signal.Throttled). Retry-After (and
// retry-after-ms, x-ms-retry-after-ms; Beta-Retry-After where no
// Retry-After is stated) is read on 403, 418, 429, 503 and 529
// and wins over every other signal; the dialects then read quotas. A response served
// from a cache (Age > 0) is stale: its fields are ignored. Malformed fields
// are ignored, never guessed at.
//
// A response without any rate-limit field costs one pass over the header
// keys and no allocation.
func (p *Parser) Parse(in *Input) Signal {
	fam := scanHeader(in.Header)
	if !p.mayCarry(in.Status, fam) {
		return Signal{}
	}
	return p.parse(in, fam)
}

// builtin is a built-in dialect, which reads the parse's working input.
type builtin interface {
	parse(in *input, s *Signal)
}

// Relevant reports whether a response with status and header may say
// anything about rate limiting to p: when it returns false, p.Parse returns
// the zero Signal, so the caller need not read the response's body. It costs
// one pass over the header keys and no allocation.
func (p *Parser) Relevant(status int, header http.Header) bool {
	return p.mayCarry(status, scanHeader(header))
}

// mayCarry reports whether a response with status and the header families
// fam may say anything: the fast path of Parse says no for most.
func (p *Parser) mayCarry(status int, fam family) bool {
	// Every status that may carry a limit is 403 or more: most fail the
	// first comparison.
	mayLimit := status >= http.StatusForbidden && readsRetryAfter(status)
	return fam&^(famAge|famNonCanonical) != 0 || mayLimit || (p != nil && p.Dialects != nil)
}

// parse is the slow path of Parse, kept apart so that the fast path stays
// small.
func (p *Parser) parse(in *Input, fam family) Signal {
	dialects, maxWait := builtinDialects, defaultMaxWait
	if p != nil {
		if p.Dialects != nil {
			dialects = p.Dialects
		}
		if p.MaxServerWait > 0 {
			maxWait = p.MaxServerWait
		}
	}

	// Copied so that in does not escape through the Dialect interface, which
	// would cost the fast path an allocation.
	w := &input{Input: *in, fam: fam}
	if fam&famNonCanonical != 0 {
		w.Header = canonicalHeader(in.Header)
	}

	s := new(Signal)
	s.Throttled = !throttledIfStated(in.Status) && readsRetryAfter(in.Status)
	if fam&famAge != 0 && isStale(w.Header) {
		return *s
	}
	if readsRetryAfter(in.Status) {
		readRetryAfter(w, s)
		if throttledIfStated(in.Status) && s.RetryAfter {
			s.Throttled = true // GitHub's secondary limits, Binance's bans, and others like them
		}
	}
	for _, d := range dialects {
		switch d := d.(type) {
		case nil:
		case builtin:
			d.parse(w, s)
		default:
			d.Parse(&w.Input, s)
		}
	}
	if in.Status == http.StatusTeapot && s.Throttled {
		// A ban of the client's address, not of the key's rate.
		s.Scope = ScopeGlobal
	}
	sanitize(s, maxWait)
	return *s
}

// sanitize keeps the documented invariants whatever the dialects did.
func sanitize(s *Signal, maxWait time.Duration) {
	s.Wait, s.Reset, s.Period, s.Limit = max(s.Wait, 0), max(s.Reset, 0), max(s.Period, 0), max(s.Limit, 0)
	if !s.HasWait {
		s.Wait, s.RetryAfter = 0, false
	}
	s.MillisecondDelay = s.MillisecondDelay && s.RetryAfter
	if s.Remaining < 0 || !s.HasRemaining {
		s.Remaining, s.HasRemaining = 0, false
	}
	if s.RetryAfter {
		s.OverMaxServerWait = s.Wait > maxWait
	} else {
		s.OverMaxServerWait = s.HasWait && s.Throttled && s.Wait > max(maxWait, maxWindowWait)
	}
}

// maxWindowWait is the longest wait derived from a quota's reset that a
// throttled response may ask a client to sleep on, unless MaxServerWait is longer:
// an hour, the longest window commonly slept through (GitHub's).
const maxWindowWait = time.Hour

// isStale reports a response served from a cache: Age greater than zero.
func isStale(h http.Header) bool {
	for _, v := range h["Age"] {
		if n, _, ok := parseNumber(v); ok && n > 0 {
			return true
		}
	}
	return false
}

// family is a set of header-field families, one bit each.
type family uint16

const (
	famRetryAfter   family = 1 << iota // Retry-After, Beta-Retry-After, Retry-After-Ms, X-Ms-Retry-After-Ms
	famAge                             // Age
	famIETF                            // RateLimit, RateLimit-*, Beta-RateLimit*
	famXRateLimit                      // X-RateLimit-*, X-Rate-Limit, X-Rate-Limit-*
	famAnthropic                       // Anthropic-RateLimit-*
	famShopify                         // X-Shopify-Shop-Api-Call-Limit
	famHubSpot                         // X-HubSpot-RateLimit-*
	famZendesk                         // Zendesk-RateLimit-*
	famStripe                          // Stripe-Should-Retry, Stripe-Rate-Limited-Reason
	famSalesforce                      // Sforce-Limit-Info
	famXVendor                         // [X-]<vendor>-RateLimit-*, [X-]<vendor>-Rate-Limit-* (with famXRateLimit)
	famQuota                           // <vendor>[-<scope>]-Quota-Limit (Auth0's token quotas)
	famNonCanonical                    // one of the above with a non-canonical key
)

// readsRetryAfter reports whether a response of status may name a wait:
// 429, 503 and 529, which are throttled whatever they say, and 403 and 418,
// which are when a stated delay (or, for 403, a dialect) says so.
func readsRetryAfter(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable ||
		status == statusOverloaded || throttledIfStated(status)
}

// throttledIfStated reports a status that rejects a request for a rate
// limit only when the response states a delay: 403 (GitHub's secondary
// limits) and 418, which RFC 9110 leaves unused and Binance answers an
// address it has banned for ignoring its 429s with, Retry-After the seconds
// until the ban ends (Binance Spot API, LIMITS).
func throttledIfStated(status int) bool {
	return status == http.StatusForbidden || status == http.StatusTeapot
}

// vendorRest returns the part of the field name k, in any case, after a
// vendor's RateLimit- or Rate-Limit- prefix, with or without an X- before
// the vendor's name (Sentry's X-Sentry-Rate-Limit-Remaining, Brevo's
// x-sib-ratelimit-reset, Fastly's Fastly-RateLimit-Remaining), or "": a
// field of the X-RateLimit family. The bare X-<vendor>-RateLimit states
// the limit, as the bare X-RateLimit does (Discogs' X-Discogs-Ratelimit
// beside X-Discogs-Ratelimit-Remaining): its rest is "Limit". The vendors
// whose fields a dialect of their own reads (HubSpot, Anthropic, Zendesk)
// and Atlassian's Beta-RateLimit (the IETF fields) are not vendors here.
func vendorRest(k string) string {
	_, rest := vendorSplit(k)
	return rest
}

// vendorSplit returns the vendor's name in the field name k and the rest
// (see vendorRest), or two empty strings.
func vendorSplit(k string) (vendor, rest string) {
	if len(k) < len("A-Ratelimit-B") {
		return "", ""
	}
	start := 0
	if k[0]|0x20 == 'x' && k[1] == '-' {
		start = 2
	}
	i := strings.IndexByte(k[start:], '-')
	if i <= 0 {
		return "", ""
	}
	vendor, rest = k[start:start+i], k[start+i+1:]
	if rest == "" || rest[0]|0x20 != 'r' {
		return "", ""
	}
	if start == 0 {
		if eqFold(vendor, "anthropic") || eqFold(vendor, "zendesk") || eqFold(vendor, "beta") {
			return "", ""
		}
	} else if eqFold(vendor, "hubspot") {
		return "", ""
	}
	for _, p := range [...]string{"ratelimit-", "rate-limit-"} {
		if hasPrefixFold(rest, p) {
			return vendor, rest[len(p):]
		}
	}
	if start == 2 && (eqFold(rest, "ratelimit") || eqFold(rest, "rate-limit")) {
		return vendor, "Limit"
	}
	return "", ""
}

// xWordKind returns the word before RateLimit in a field name k of the form
// X-<Word>RateLimit-<field>, in any case (Strava's X-ReadRateLimit-Usage,
// Cloudinary's X-FeatureRateLimit-Remaining), or "": the word is the kind
// of the field's limit.
func xWordKind(k string) string { return xWordBefore(k, "ratelimit") }

// xWordBefore returns the word of a field name k of the form
// X-<Word><suffix>-<field>, in any case, or "" if k has no such form;
// suffix is in lower case.
func xWordBefore(k, suffix string) string {
	if len(k) < len("X-A-B")+len(suffix) || k[0]|0x20 != 'x' || k[1] != '-' {
		return ""
	}
	j := strings.IndexByte(k[2:], '-')
	if j <= len(suffix) || 3+j >= len(k) || !eqFold(k[2+j-len(suffix):2+j], suffix) {
		return ""
	}
	return k[2 : 2+j-len(suffix)]
}

// mayBeVendor reports whether k may be a vendor's field (see vendorRest):
// the '-' after its first word, or after X- and its second, is followed by
// an 'R'. It rejects most keys with a few byte comparisons.
func mayBeVendor(k string) bool {
	if len(k) < len("A-Ratelimit-B") {
		return false
	}
	start := 0
	if len(k) > 2 && k[0]|0x20 == 'x' && k[1] == '-' {
		start = 2
	}
	i := strings.IndexByte(k[start:], '-')
	return i > 0 && start+i+1 < len(k) && k[start+i+1]|0x20 == 'r'
}

// scanHeader finds which families of rate-limit fields a header holds, in
// one pass over its keys with a few byte comparisons each: the common
// response without any costs next to nothing.
func scanHeader(h http.Header) family {
	var fam family
	if len(h) == 0 {
		return 0
	}
	for k := range h {
		if len(k) < 3 {
			continue
		}
		var f family
		switch k[0] | 0x20 {
		case 'r':
			switch {
			case hasPrefixFold(k, "ratelimit"):
				f = famIETF
			case hasPrefixFold(k, "rate-limit-"):
				f = famXRateLimit // Xendit's Rate-Limit-Remaining: the X- family's fields
			case hasPrefixFold(k, "retry-after") && (len(k) == 11 || eqFold(k[11:], "-ms")):
				f = famRetryAfter
			}
		case 'x':
			if k[1] != '-' {
				break
			}
			switch {
			case hasPrefixFold(k, "x-ratelimit") || hasPrefixFold(k, "x-rate-limit") ||
				hasPrefixFold(k, "x-app-limit-") || hasPrefixFold(k, "x-user-limit-"):
				f = famXRateLimit
			case xWordKind(k) != "":
				f = famXRateLimit
			case hasPrefixFold(k, "x-limit-") || hasPrefixFold(k, "x-remaining-") || xLimitWord(k) != "":
				f = famXRateLimit // Etsy's and Xero's windows in the name
			case hasPrefixFold(k, "x-bapi-limit"):
				f = famXRateLimit // Bybit's X-Bapi-Limit-* (see xAlias)
			case hasSuffixFold(k, "-calls-left") || hasSuffixFold(k, "-seconds-until-full") ||
				hasSuffixFold(k, "-seconds-until-next-refill"):
				f = famXRateLimit // Stack Overflow for Teams' limiters (see countdownName)
			case eqFold(k, "x-ms-retry-after-ms"):
				f = famRetryAfter
			case eqFold(k, "x-shopify-shop-api-call-limit"):
				f = famShopify
			case hasPrefixFold(k, "x-hubspot-ratelimit-"):
				f = famHubSpot
			}
		case 'a':
			switch {
			case eqFold(k, "age"):
				f = famAge
			case hasPrefixFold(k, "anthropic-ratelimit-"):
				f = famAnthropic
			}
		case 'b':
			switch {
			case hasPrefixFold(k, "beta-ratelimit"):
				f = famIETF
			case eqFold(k, "beta-retry-after"):
				f = famRetryAfter
			}
		case 'z':
			if hasPrefixFold(k, "zendesk-ratelimit-") {
				f = famZendesk
			}
		case 's':
			switch {
			case eqFold(k, "stripe-should-retry") || eqFold(k, "stripe-rate-limited-reason"):
				f = famStripe
			case eqFold(k, "sforce-limit-info"):
				f = famSalesforce
			}
		}
		if f == 0 && len(k) > len("-quota-limit") && hasSuffixFold(k, "-quota-limit") {
			f = famQuota
		}
		if f == 0 {
			// A vendor's field, whatever its first letter: the length
			// first, which most keys fail, then the letter after the
			// vendor's name.
			if len(k) < len("A-Ratelimit-B") || !mayBeVendor(k) || vendorRest(k) == "" {
				continue
			}
			f = famXRateLimit | famXVendor
		}
		fam |= f
		if !isCanonical(k) {
			fam |= famNonCanonical
		}
	}
	return fam
}

// hasPrefixFold reports whether s begins with prefix, ignoring ASCII case;
// prefix must be lower-case letters, digits and '-'.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && eqFold(s[:len(prefix)], prefix)
}

// hasSuffixFold reports whether s ends with suffix, ignoring ASCII case;
// suffix must be lower-case letters, digits and '-'.
func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && eqFold(s[len(s)-len(suffix):], suffix)
}

// eqFold reports whether s equals lower, ignoring ASCII case; lower must be
// lower-case letters, digits and '-'. A control byte may compare equal to a
// digit or '-': harmless here, it only sends a response down the slow path.
func eqFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i]|0x20 != lower[i] {
			return false
		}
	}
	return true
}

// isCanonical reports whether k is in the form textproto.CanonicalMIMEHeaderKey
// gives it (for the letters, digits and hyphens of the keys we look for).
func isCanonical(k string) bool {
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case 'a' <= c && c <= 'z':
			if upper {
				return false
			}
		case 'A' <= c && c <= 'Z':
			if !upper {
				return false
			}
		}
		upper = c == '-'
	}
	return true
}

// canonicalHeader returns a copy of h with canonical keys, merging the
// values of keys that differ only in case.
func canonicalHeader(h http.Header) http.Header {
	c := make(http.Header, len(h))
	for k, v := range h {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		c[ck] = append(c[ck], v...)
	}
	return c
}

// allDigits reports whether s is a non-empty run of ASCII digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
