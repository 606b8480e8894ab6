package ratelimitheader

import (
	"net/http"
	"strings"
	"time"
)

// xRateLimitDialect reads the X-RateLimit-* family that most APIs send,
// in every spelling seen in the wild. A field name is a prefix, a kind and
// a field, the kind before or after the field:
//
//   - prefixes X-RateLimit- (GitHub, Discord, Reddit, Atlassian, Linear,
//     RapidAPI, and countless others), X-Rate-Limit- (Okta, Twitter/X,
//     Trello), X-App-Limit- and X-User-Limit- (X's 24-hour limits),
//     X-<Word>RateLimit-, the word a kind (Strava's X-ReadRateLimit-,
//     Cloudinary's X-FeatureRateLimit-); and the bare X-Rate-Limit
//     (Zendesk) and X-RateLimit, read as a Limit; and a vendor's name
//     between X- and either (Sentry's X-Sentry-Rate-Limit-, Brevo's
//     X-Sib-Ratelimit-, Azure's X-Ms-Ratelimit-, Riot's X-App-Rate-Limit
//     and X-Method-Rate-Limit), but HubSpot's, which its dialect reads, the
//     bare X-<vendor>-RateLimit a Limit too (Discogs'), the vendor's name
//     the kind of its fields; and Bybit's X-Bapi-Limit, X-Bapi-Limit-Status
//     and X-Bapi-Limit-Reset-Timestamp, its own spelling of Limit, Remaining
//     and Reset (see xAlias);
//   - fields Limit (also spelt Max, Total), Remaining, Reset (also spelt
//     Reset-At, ResetAt, Reset-Time, ResetTime), Reset-After (Discord's
//     precise delta, preferred to Reset) or Reset-Seconds (Split's),
//     Reset-Ms (a delta or an epoch in
//     milliseconds), Used, Usage (Strava) or Consumed (Segment): what is
//     left is Limit minus what was used when Remaining is absent, Count
//     (Riot's, with a Limit of
//     <limit>:<seconds> pairs; see pairWindows), Name (Datadog's), a
//     Bucket as Bucket and Resource are, Retry-After (MailerLite's stated
//     delay in seconds) and Next (Akamai's instant the next request may go,
//     in any form a reset takes), both read on a throttled status as
//     Retry-After is; the window's length, which is the quota's Period:
//     Interval-Ms or Interval-Milliseconds (Trello, HighLevel) in
//     milliseconds, Interval-Seconds, Period (Datadog), Window or
//     Window-Size (Composio's 600s) in seconds or as a duration with its
//     unit, Interval with its unit, or as a bare number only where it and
//     the resets can only count milliseconds (ImageKit's; see msWindow),
//     a 429 that states no remaining then spending the window; FillRate with
//     Interval-Seconds (Atlassian Data Center: a bucket of Limit that
//     refills FillRate every Interval-Seconds), which give the quota's
//     Limit and Period as the refill;
//   - kinds: none; the scope of a limit, each scope a window of its own
//     (Trello's X-Rate-Limit-Api-Token-Max, -Api-Key- and -Member-, Azure's
//     X-Ms-Ratelimit-Remaining-Subscription-Reads), Requests among them
//     (OpenAI's X-RateLimit-Remaining-Requests, Linear's and RapidAPI's
//     X-RateLimit-Requests-Remaining); a window, which states the period
//     (Kong's -Minute, -Hour, ..., or -30 seconds, HighLevel's -Daily, X's
//     24hour); and a unit other than requests (Tokens, Complexity, Points,
//     Cost, Credits, Bytes, Units, Concurrent; see xKind): an exhausted
//     one governs the wait, but is not Remaining.
//
// A kind Per<window> names its window too (Tumblr's
// X-Ratelimit-Perday-Remaining and -Perhour-); X-RateLimit-Type names the
// window of the kind-less fields (Zoom's Daily-limit and QPS; see
// typeWindow); X-RateLimit-Resource: graphql makes them count GitHub's
// GraphQL points, not requests. Stack Overflow for Teams names each
// limiter's fields X-<limiter>-Calls-Left, -Seconds-Until-Full and
// -Seconds-Until-Next-Refill (see countdownName).
//
// Some name the window without a RateLimit prefix: Etsy's
// X-Limit-Per-Second, X-Remaining-This-Second, X-Limit-Per-Day and
// X-Remaining-Today, Xero's X-DayLimit-Remaining, X-MinLimit-Remaining and
// X-AppMinLimit-Remaining (see windowedName). Xero's X-Rate-Limit-Problem
// names the window a 429 met (minute, day, appminute: the app's, across
// tenants, a global pause).
//
// With several scopes or windows, the one with the fewest left binds (see
// Signal.AddQuota). A reset stated without a kind serves the scopes that
// state none (LaunchDarkly's Global and Route; see shareReset), and a spent
// Global scope pauses every key of the host. A Limit whose value is a JSON
// object describes a window whole (Trakt's X-Ratelimit; see jsonWindow). A 429 that says nothing of what is left of any window
// but names a reset met the window of that reset: it is spent, its reset
// the wait (Contentful's X-Contentful-RateLimit-Reset).
//
// A Remaining may list named policies, <policy>;<count>, each a window of
// its own whose name may end with its length (Azure's
// x-ms-ratelimit-remaining-resource: Microsoft.Compute/HighCostGet3Min;107,
// Microsoft.Compute/HighCostGet30Min;587); see policyCounts.
//
// A reset may be a delta in seconds, an epoch in seconds or milliseconds,
// a Go duration, an RFC 3339 timestamp (with or without seconds), an
// HTTP-date, or a date-time without a zone, read as UTC only within the
// hour after the response's Date where no other zone fits; see parseReset.
// A count may be a decimal (Reddit's 599.0).
// X-RateLimit-Bucket (Discord) and X-RateLimit-Resource (GitHub) name the
// signal's Bucket.
//
// A limit may carry an early IETF draft's policies (X-RateLimit-Limit:
// 20, 20;w=60): the limit, then the policies, the one of the same size
// giving the window's length.
//
// Several windows may come as comma-separated lists, member by member
// (Strava's X-RateLimit-Limit: 200,2000 with X-RateLimit-Usage: 150,2000):
// each position is a window, the exhausted one governs. Otherwise a field
// sent on several lines, or folded into one by a proxy, takes its most
// conservative value: the fewest remaining, the smallest limit, the latest
// reset.
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

// xPrefixes are the prefixes of the X-RateLimit family, canonical, with
// the kind each implies.
var xPrefixes = [...]struct{ prefix, kind string }{
	{"X-Ratelimit-", ""},
	{"X-Rate-Limit-", ""},
	{"Rate-Limit-", ""},
	{"X-App-Limit-", "App-"},
	{"X-User-Limit-", "User-"},
}

// xField is a field of the X-RateLimit family.
type xField uint8

const (
	xNone xField = iota
	xLimit
	xRemaining
	xReset
	xResetAfter
	xResetMs
	xUsed
	xUsage
	xRetryAfter
	xNext
	xCount // what a window has counted, as <count>:<seconds> pairs (Riot)
	xFillRate
	xInterval   // a window's length in seconds, or a duration with its unit
	xIntervalMs // a window's length in milliseconds
	xDuration   // a window's length as a duration with its unit only
	xNextRefill // seconds until a bucket adds its next tokens (Stack Overflow for Teams)
	xFields     // the number of fields
)

// xFieldNames are the fields' names, canonical, longest first where one
// begins another.
var xFieldNames = [...]struct {
	name  string
	field xField
}{
	{"Reset-After", xResetAfter},
	{"Reset-At", xReset},
	{"Reset-Time", xReset},
	{"Reset-Seconds", xResetAfter},
	{"Reset-Ms", xResetMs},
	{"Resetat", xReset},
	{"Resettime", xReset},
	{"Remaining", xRemaining},
	{"Limit", xLimit},
	{"Max", xLimit},
	{"Total", xLimit},
	{"Reset", xReset},
	{"Used", xUsed},
	{"Usage", xUsage},
	{"Consumed", xUsed},
	{"Count", xCount},
	{"Retry-After", xRetryAfter},
	{"Next", xNext},
	{"Fillrate", xFillRate},
	{"Interval-Milliseconds", xIntervalMs},
	{"Interval-Ms", xIntervalMs},
	{"Interval-Seconds", xInterval},
	{"Interval", xDuration},
	{"Window-Size", xInterval},
	{"Window", xInterval},
	{"Period", xInterval},
}

// splitXName returns the kind and field of the part of a field name after
// its prefix: "Remaining", "Remaining-Requests", "Requests-Remaining".
func splitXName(rest string) (kind string, f xField) {
	for _, n := range xFieldNames {
		switch {
		case rest == n.name:
			return "", n.field
		case len(rest) > len(n.name)+1 && strings.HasSuffix(rest, n.name) && rest[len(rest)-len(n.name)-1] == '-':
			return rest[:len(rest)-len(n.name)-1], n.field
		case len(rest) > len(n.name)+1 && strings.HasPrefix(rest, n.name) && rest[len(n.name)] == '-':
			return rest[len(n.name)+1:], n.field
		}
	}
	return "", xNone
}

// xGroup gathers the lines of one kind's fields.
type xGroup struct {
	kind  string
	lines [xFields][]string // by field; Usage's go with Used
	usage bool              // Used came as Usage (Strava)
	// period is the window the fields' names state, where the kind alone
	// does not (Xero's X-AppMinLimit-: the kind Appmin, a minute), or
	// another field names (Zoom's X-RateLimit-Type; see typeWindow).
	period time.Duration
	// unit is what the fields count where another field says it and the
	// kind does not (GitHub's GraphQL points; see xRateLimitDialect).
	unit string
}

// maxXGroups bounds the kinds read from one response.
const maxXGroups = 8

// Parse reads in into s (see Dialect).
func (d xRateLimitDialect) Parse(in *Input, s *Signal) { d.parse(newInput(in), s) }

func (xRateLimitDialect) parse(in *input, s *Signal) {
	if !in.has(famXRateLimit) {
		return
	}
	var (
		buf     [maxXGroups]xGroup
		groups  = buf[:0]
		problem string
		points  bool          // GitHub's x-ratelimit-resource: graphql: the kind-less fields count points
		typed   time.Duration // the window X-RateLimit-Type names (Zoom's Daily-limit, QPS)
	)
	for k, vs := range in.Header {
		rest, kind := "", ""
		for _, p := range xPrefixes {
			if strings.HasPrefix(k, p.prefix) {
				rest, kind = k[len(p.prefix):], p.kind
				break
			}
		}
		if w := xWordKind(k); rest == "" && w != "" {
			rest, kind = k[len("X-")+len(w)+len("Ratelimit-"):], w+"-"
		}
		if rest == "" && in.has(famXVendor) {
			// Canonical: the rest as spelt. The vendor's name is the
			// kind, so that two vendors' fields (Riot's X-App-Rate-Limit
			// and X-Method-Rate-Limit) stay apart.
			if v, r := vendorSplit(k); r != "" {
				rest, kind = r, v+"-"
			}
		}
		var (
			f      xField
			period time.Duration
		)
		if rest == "" {
			kind, f, period = windowedName(k)
		}
		if rest == "" && f == xNone {
			kind, f = xAlias(k)
		}
		if rest == "" && f == xNone {
			kind, f = countdownName(k)
		}
		if f == xNone {
			if rest == "" {
				if k != "X-Rate-Limit" && k != "X-Ratelimit" { // Zendesk, CometChat, Composio
					continue
				}
				rest = "Limit"
			}
			switch rest {
			case "Bucket", "Resource", "Name":
				b := firstItem(vs)
				if s.Bucket == "" && b != "" {
					s.Bucket = b
				}
				if rest == "Resource" && strings.EqualFold(b, "graphql") {
					points = true
				}
				continue
			case "Type":
				typed = typeWindow(firstItem(vs))
				continue
			case "Problem":
				problem = firstItem(vs)
				continue
			}
			var sub string
			sub, f = splitXName(rest)
			if f == xNone {
				continue
			}
			kind += sub
		}
		if f == xLimit && jsonWindow(vs, in, s) {
			continue
		}
		var g *xGroup
		groups, g = member(groups, maxXGroups, kind, func(g *xGroup) string { return g.kind },
			func() xGroup { return xGroup{kind: kind} })
		if g == nil {
			continue
		}
		if period > 0 {
			g.period = period
		}
		if f == xUsage {
			f, g.usage = xUsed, true
		}
		g.lines[f] = addLines(g.lines[f], vs)
	}
	silent := !s.HasRemaining // no field of the response says what is left
	for i := range groups {
		silent = silent && len(groups[i].lines[xRemaining])+len(groups[i].lines[xUsed]) == 0
	}
	shareReset(groups)
	for i := range groups {
		if groups[i].kind == "" {
			if points {
				groups[i].unit = "points"
			}
			if typed > 0 && groups[i].period == 0 {
				groups[i].period = typed
			}
		}
		groups[i].add(in, s, silent)
	}
	if problem != "" && s.Throttled {
		readProblem(problem, s)
	}
}

// member returns list and its member named name (by nameOf), fresh()
// appended to list if it has none and holds fewer than limit members; nil
// when it is full. It serves the groups of one response's fields, in an
// array on the caller's stack that limit keeps list from outgrowing.
func member[T any](list []T, limit int, name string, nameOf func(*T) string, fresh func() T) ([]T, *T) {
	for i := range list {
		if nameOf(&list[i]) == name {
			return list, &list[i]
		}
	}
	if len(list) >= limit {
		return list, nil
	}
	list = append(list, fresh())
	return list, &list[len(list)-1]
}

// windowedName returns the kind, the field and the window of a field whose
// name states its window without a RateLimit prefix, or xNone:
//
//   - X-Limit-Per-<window> and X-Remaining-This-<window>, X-Remaining-Today
//     (Etsy Open API v3, Rate limits: X-Limit-Per-Second,
//     X-Remaining-This-Second, X-Limit-Per-Day, X-Remaining-Today), the kind
//     the window's name, so that a limit and its remaining meet;
//   - X-<scope><window>Limit-<field> (Xero, OAuth 2.0 API limits:
//     X-DayLimit-Remaining, X-MinLimit-Remaining and the app-wide
//     X-AppMinLimit-Remaining), the kind the word before Limit.
//
// k is canonical.
func windowedName(k string) (kind string, f xField, period time.Duration) {
	switch {
	case strings.HasPrefix(k, "X-Limit-"):
		f, kind = xLimit, k[len("X-Limit-"):]
	case strings.HasPrefix(k, "X-Remaining-"):
		f, kind = xRemaining, k[len("X-Remaining-"):]
	default:
		w := xLimitWord(k)
		if w == "" {
			return "", xNone, 0
		}
		sub, f := splitXName(k[len("X-")+len(w)+len("limit-"):])
		if f == xNone || sub != "" {
			return "", xNone, 0
		}
		_, period = splitWindowWord(w)
		return w, f, period
	}
	if kind == "Today" {
		return "Day", f, 24 * time.Hour
	}
	if w, ok := strings.CutPrefix(kind, "Per-"); ok && f == xLimit {
		kind = w
	} else if w, ok := strings.CutPrefix(kind, "This-"); ok && f == xRemaining {
		kind = w
	}
	if period = windowWord(kind); period == 0 {
		return "", xNone, 0
	}
	return kind, f, period
}

// xLimitWord returns the word of a field name k of the form
// X-<scope><window>Limit-<field>, in any case, whose end names a window
// (Xero's X-DayLimit-Remaining: Day; X-AppMinLimit-Remaining: AppMin), or
// "". X-RateLimit- is not one: its word names no window.
func xLimitWord(k string) string {
	w := xWordBefore(k, "limit")
	if len(w) < len("Day") {
		return ""
	}
	if _, d := splitWindowWord(w); d == 0 {
		return ""
	}
	return w
}

// windowWords are the names of windows a word may end with, longest first
// where one ends another. None is shorter than three letters: a word ending
// in s, m or h says nothing.
var windowWords = [...]struct {
	name   string
	period time.Duration
}{
	{"second", time.Second}, {"minute", time.Minute}, {"hour", time.Hour}, {"daily", 24 * time.Hour},
	{"day", 24 * time.Hour}, {"sec", time.Second}, {"min", time.Minute},
}

// splitWindowWord splits a word that ends with a window's name (Xero's
// Day, Min, AppMin, appminute) into the scope before it (App) and the
// window's length, or returns zero.
func splitWindowWord(w string) (scope string, period time.Duration) {
	for _, ww := range windowWords {
		if len(w) >= len(ww.name) && eqFold(w[len(w)-len(ww.name):], ww.name) {
			return w[:len(w)-len(ww.name)], ww.period
		}
	}
	return "", 0
}

// windowWord returns the length of the window a word names whole (Second,
// Day, Minute, Min), or zero.
func windowWord(w string) time.Duration {
	if scope, d := splitWindowWord(w); scope == "" {
		return d
	}
	return 0
}

// readProblem reads the limit a throttled response says it met, Xero's
// X-Rate-Limit-Problem (OAuth 2.0 API limits: minute, day, appminute): that
// window is spent, whatever its remaining field said; no reset is named,
// Retry-After gives the wait. The app's minute limit counts the requests of
// every tenant: its pause is global.
func readProblem(v string, s *Signal) {
	scope, period := splitWindowWord(v)
	if period == 0 {
		return
	}
	s.AddQuota(Quota{Remaining: 0, Period: period})
	if eqFold(scope, "app") {
		s.Scope = ScopeGlobal
	}
}

// add records the windows of g in s; silent reports that no field of the
// response says what is left of any window.
func (g *xGroup) add(in *input, s *Signal, silent bool) {
	unit, period := xKind(g.kind)
	if g.period > 0 {
		period = g.period
	}
	if g.unit != "" {
		unit = g.unit
	}
	stated, ok := maxOf(g.lines[xInterval], parsePeriod)
	for _, f := range [...]struct {
		field xField
		parse func(string) (time.Duration, bool)
	}{{xIntervalMs, parsePeriodMillis}, {xDuration, parseDurationPeriod}} {
		if d, dOK := maxOf(g.lines[f.field], f.parse); dOK && (!ok || d > stated) {
			stated, ok = d, true
		}
	}
	fill, fillOK := minCount(g.lines[xFillRate])
	switch {
	case !ok:
		stated = 0
	case len(g.lines[xFillRate]) > 0 && (!fillOK || fill == 0):
		// The interval of a refill that is not one: no window at all.
		stated = 0
	default:
		period = stated // stated outright, it wins over the kind's name
	}
	if len(g.lines[xRetryAfter])+len(g.lines[xNext]) > 0 && readsRetryAfter(in.Status) {
		// Read where Retry-After is, and as it is (see Parser.Parse).
		d, ok := maxOf(g.lines[xRetryAfter], parseSeconds)
		if n, valid := maxOf(g.lines[xNext], func(v string) (time.Duration, bool) { return parseReset(v, in) }); valid && (!ok || n > d) {
			d, ok = n, true
		}
		if ok {
			s.AddRetryAfter(d)
			s.Throttled = s.Throttled || throttledIfStated(in.Status)
		}
	}
	var lb, rb, tb, ub [4]string
	lim := fieldItems(lb[:0], g.lines[xLimit])
	if pairWindows(s, lim, fieldItems(ub[:0], g.lines[xCount]), unit) && len(g.lines[xRemaining]) == 0 {
		return
	}
	if len(lim) > 1 && hasParams(g.lines[xLimit]) {
		if pols := ietfPolicies(g.lines[xLimit]); len(pols) > 1 && !pols[0].named && pols[0].w == 0 {
			// An early draft's policies: the limit, then its windows.
			lim = lim[:1]
			for _, p := range pols[1:] {
				if p.q == pols[0].q && p.w > 0 && period == 0 {
					period = p.w
					break
				}
			}
		}
	}
	rem := fieldItems(rb[:0], g.lines[xRemaining])
	if policyCounts(s, rem, unit) {
		rem = plainCounts(rem)
	}
	used := fieldItems(ub[:0], g.lines[xUsed])
	resets, parse := fieldItems(tb[:0], g.lines[xReset]), parseReset
	switch {
	case len(g.lines[xResetAfter]) > 0:
		resets, parse = fieldItems(tb[:0], g.lines[xResetAfter]), func(v string, _ *input) (time.Duration, bool) { return parseSeconds(v) }
	case len(g.lines[xResetMs]) > 0:
		resets, parse = fieldItems(tb[:0], g.lines[xResetMs]), parseResetMillis
	case stated == 0:
		if iv, ok := msWindow(g.lines[xDuration], resets); ok {
			period, parse = iv, parseResetMillis
			break
		}
		fallthrough
	default:
		if in.MillisecondResets || msResets(resets, period, s) {
			parse = parseDeltaMillis
		}
	}
	derived := false
	if len(rem) == 0 && len(used) > 0 && len(used) == len(lim) {
		derived = true // Remaining is Limit minus Used, member by member
	}
	n := len(rem)
	if derived {
		n = len(used)
	}
	fits := func(l int) bool { return l <= 1 || l == n }
	if n >= 2 && fits(len(resets)) && (derived || fits(len(lim))) {
		// One window per position.
		strava := g.usage && n == 2 && len(resets) == 0
		for i := range n {
			var q Quota
			var ok bool
			if derived {
				l, ok1 := parseCount(lim[i])
				u, ok2 := parseCount(used[i])
				q.Remaining, q.Limit, ok = max(l-u, 0), l, ok1 && ok2
			} else {
				q.Remaining, ok = parseCount(rem[i])
				if len(lim) > 0 {
					q.Limit, _ = parseCount(lim[min(i, len(lim)-1)])
				}
			}
			if !ok {
				continue
			}
			if len(resets) > 0 {
				q.Reset, _ = parse(resets[min(i, len(resets)-1)], in)
			}
			q.Period, q.Unit = period, unit
			if strava {
				q.Period, q.Reset = stravaWindow(i, in.ServerTime())
			}
			s.AddQuota(q)
		}
		return
	}
	var w window
	if n, ok := minCount(lim); ok {
		w.limit, w.hasLimit = n, true
	}
	if fillOK && fill > 0 && stated > 0 {
		// A bucket that states its refill: FillRate every interval.
		// Limit is its size, which Remaining shows at most.
		w.limit, w.hasLimit = fill, true
	}
	if r, ok := minCount(rem); ok {
		w.remaining, w.hasRem = r, true
	} else if u, ok := maxCount(used); ok && w.hasLimit && len(rem) == 0 {
		w.remaining, w.hasRem = max(w.limit-u, 0), true
	}
	for _, v := range resets {
		w.addReset(parse(v, in))
	}
	if d, ok := maxOf(g.lines[xNextRefill], parseSeconds); ok && w.hasRem && w.remaining == 0 {
		// An empty bucket has requests again at its next refill, long
		// before it is full (see countdownName).
		w.reset, w.hasRst = d, true
	}
	if !w.hasRem && len(rem)+len(used) == 0 && w.hasRst && (period > 0 || silent) && in.Status == http.StatusTooManyRequests {
		// A 429 that describes one window by its length and reset, and
		// says nothing of what is left (ImageKit's Limit, Reset and
		// Interval), or that says nothing of what is left of any window
		// and names a reset (Contentful's X-Contentful-RateLimit-Reset,
		// the seconds until the next request may go): the window it met,
		// spent.
		w.hasRem = true
	}
	w.add(s, period, unit)
	if w.hasRem && w.remaining == 0 && w.hasRst && (!in.hasSpent || w.reset > in.spent) {
		in.spent, in.hasSpent = w.reset, true
	}
	if w.hasRem && w.remaining == 0 && eqFold(g.kind, "global") {
		// A spent limit of the whole account, across routes
		// (LaunchDarkly's X-Ratelimit-Global-Remaining).
		s.Scope = ScopeGlobal
	}
}

// msWindow reads a window's length stated as a bare number, which most
// fields count in seconds and ImageKit's X-RateLimit-Interval in
// milliseconds (ImageKit API overview, Rate limits: X-RateLimit-Reset and
// X-RateLimit-Interval in milliseconds), and returns it in milliseconds
// only where nothing else fits, so that its resets are read in milliseconds
// too:
//
//   - the interval I, an integer, is a whole number of seconds in
//     milliseconds, from a second to a day, and not a whole number of hours
//     in seconds: 60000 is a minute, or 16 h 40 min, which no window is;
//     18000 is 18 s, or the 5 h a window may well be, and stays unread;
//   - every reset R is an integer longer in seconds than I in milliseconds,
//     which no reset within its window is, and no longer than I: 1500 with
//     60000 is 1.5 s, not 25 minutes.
//
// Anything else leaves the interval unread and the resets as they are.
func msWindow(intervals, resets []string) (time.Duration, bool) {
	var b [2]string
	items := fieldItems(b[:0], intervals)
	if len(items) != 1 || len(resets) == 0 {
		return 0, false
	}
	iv, frac, ok := parseNumber(items[0])
	if !ok || frac != 0 || iv < 1000 || iv > 86_400_000 || iv%1000 != 0 || iv%3600 == 0 {
		return 0, false
	}
	for _, v := range resets {
		r, frac, ok := parseNumber(v)
		if !ok || frac != 0 || r <= iv/1000 || r > iv {
			return 0, false
		}
	}
	return time.Duration(iv) * time.Millisecond, true
}

// msResets reports whether a window's resets, stated as bare whole numbers
// that read as deltas in seconds, count milliseconds instead, as
// Prisjakt's X-Rate-Limit-Reset does (Prisjakt API docs, Rate Limits: "the
// time in milliseconds when the current rate limit window resets",
// X-Rate-Limit-Reset: 600000), where the same response shows it:
//
//   - a response that is not throttled states the window's length, period:
//     every reset, read in seconds, is beyond it by more than an eighth of
//     it and a second, which no reset of a window that still admits
//     requests is, and read in milliseconds within it (a throttled response may name a reset far
//     beyond its window, the block of a punishing server, and is left to
//     the next rule);
//   - or the response states a delay (Retry-After, read before the
//     dialects): every reset, read in milliseconds, agrees with it to
//     within a second, and read in seconds is more than a second longer.
//
// A reset that is not a whole number, zero, an epoch, or any reset that
// fits in seconds keeps its reading in seconds: nothing else in a single
// response tells a delta in milliseconds from a long one in seconds (only
// successive responses would: a delta in milliseconds read as seconds
// falls a thousand times faster than the clock).
func msResets(resets []string, period time.Duration, s *Signal) bool {
	byWindow, byDelay := period > 0 && !s.Throttled, s.RetryAfter && s.Wait > 0
	if len(resets) == 0 || (!byWindow && !byDelay) {
		return false
	}
	for _, v := range resets {
		n, frac, ok := parseNumber(v)
		if !ok || frac != 0 || n == 0 || n >= surelyDelta {
			return false
		}
		sec, ms := time.Duration(n)*time.Second, time.Duration(n)*time.Millisecond
		// Beyond the window by an eighth and a second: a day's window
		// counted in local time lasts 25 hours once a year.
		fits := byWindow && sec > period+period/8+time.Second && ms <= period+time.Second
		if byDelay && sec > s.Wait+time.Second && ms-s.Wait <= time.Second && s.Wait-ms <= time.Second {
			fits = true
		}
		if !fits {
			return false
		}
	}
	return true
}

// policyCounts records in s the members of a Remaining field that name
// their policy, <policy>;<count>, each a window of its own, and reports
// whether there was any. Azure's resource providers send one per throttling
// policy the request counted against (Microsoft Learn, Troubleshooting API
// throttling errors: x-ms-ratelimit-remaining-resource:
// Microsoft.Compute/HighCostGet3Min;107,Microsoft.Compute/HighCostGet30Min;587,
// one line or several); a policy's name may end with its window (3Min,
// 30Min; see policyWindow). No reset is stated: a spent policy names no
// wait, the Retry-After of the 429 does. A member whose count is not a
// count ("76;w=21600", an early IETF draft's policy) is not one.
func policyCounts(s *Signal, items []string, unit string) bool {
	found := false
	for _, item := range items {
		name, count, ok := strings.Cut(item, ";")
		if !ok {
			continue
		}
		name = trimOWS(name)
		n, ok := parseCount(count)
		if !ok || !hasLetter(name) {
			continue
		}
		found = true
		s.AddQuota(Quota{Remaining: n, Period: policyWindow(name), Unit: unit})
	}
	return found
}

// plainCounts returns the members of items that do not name a policy (see
// policyCounts), in place.
func plainCounts(items []string) []string {
	out := items[:0]
	for _, item := range items {
		if name, count, ok := strings.Cut(item, ";"); ok && hasLetter(name) {
			if _, ok := parseCount(count); ok {
				continue
			}
		}
		out = append(out, item)
	}
	return out
}

// policyWindow returns the window a policy's name ends with, a count and a
// unit of at least three letters (Azure's HighCostGet3Min, PutVM30Min:
// 3 and 30 minutes), or zero: a name without (VmssQueuedVMOperations), or
// with a bare number or a one-letter unit, which may be anything
// (HighCostGet2, Gen2d), states no window.
func policyWindow(name string) time.Duration {
	name = name[strings.LastIndexByte(name, '/')+1:]
	j := len(name)
	for j > 0 && isLetter(name[j-1]) {
		j--
	}
	i := j
	for i > 0 && isDigit(name[i-1]) {
		i--
	}
	if len(name)-j < 3 || i == j {
		return 0
	}
	d, _ := periodName(name[i:])
	return d
}

// hasLetter reports whether v holds an ASCII letter.
func hasLetter(v string) bool {
	for i := 0; i < len(v); i++ {
		if isLetter(v[i]) {
			return true
		}
	}
	return false
}

func isLetter(c byte) bool { c |= 0x20; return 'a' <= c && c <= 'z' }

// parseResetMillis parses a reset stated in milliseconds: a delta below
// 1e11 (three years), else an epoch in milliseconds.
func parseResetMillis(v string, in *input) (time.Duration, bool) {
	n, frac, ok := parseNumber(v)
	switch {
	case !ok:
		return 0, false
	case n < 100_000_000_000:
		return toDuration(n, frac, time.Millisecond), true
	}
	return parseReset(v, in)
}

// parseDeltaMillis parses a reset whose bare whole deltas (below
// surelyDelta) count milliseconds (see msResets, Input.MillisecondResets);
// any other form is read as parseReset reads it.
func parseDeltaMillis(v string, in *input) (time.Duration, bool) {
	if n, frac, ok := parseNumber(v); ok && frac == 0 && n < surelyDelta {
		return toDuration(n, 0, time.Millisecond), true
	}
	return parseReset(v, in)
}

// stravaWindow returns the period and the reset of Strava's window i (of
// two): 15 minutes, starting at 0, 15, 30 and 45 minutes past the hour, and
// a day, starting at midnight UTC.
func stravaWindow(i int, now time.Time) (period, reset time.Duration) {
	period = 15 * time.Minute
	if i == 1 {
		period = 24 * time.Hour
	}
	now = now.UTC()
	return period, now.Truncate(period).Add(period).Sub(now)
}

// xKind returns the unit and the window a kind of X-RateLimit field
// implies. A kind is the scope of a limit (Trello's Api-Token, Api-Key and
// Member, X's App, Azure's Subscription-Reads) or a window (Kong's Minute),
// and counts requests, unless one of its words names another unit (OpenAI's
// Tokens, Linear's Complexity): the unit is that word, lower case. The
// period is the window the kind's last word names, if it names one.
func xKind(kind string) (unit string, period time.Duration) {
	if kind == "" {
		return "", 0
	}
	last := kind[strings.LastIndexByte(kind, '-')+1:]
	if p, ok := periodName(last); ok {
		period = p
	} else if w, ok := cutPrefixFold(last, "per"); ok && w != "" && !isDigit(w[0]) {
		// Tumblr's X-Ratelimit-Perday-Remaining and -Perhour-: the window
		// after "per", by name only (Per30 is no window).
		if p, ok := periodName(w); ok {
			period = p
		}
	}
	for word := range strings.SplitSeq(kind, "-") {
		for _, u := range nonRequestUnits {
			if strings.EqualFold(word, u) {
				return u, period
			}
		}
	}
	return "", period
}

// typeWindow returns the window a value of X-RateLimit-Type names, or
// zero: Zoom's Daily-limit (a day) and QPS (a second), which say which of
// an endpoint's limits the kind-less X-RateLimit-Limit and -Remaining
// describe (Zoom API docs, Rate limits: "Rate Limit Type - how that quota
// is enforced, either per second (QPS) or as a daily limit"; the example
// 429 has X-RateLimit-Category: Heavy, X-RateLimit-Type: Daily-limit,
// X-RateLimit-Limit: 30000, X-RateLimit-Remaining: 0). A value naming no
// window (a category such as Heavy) is none.
func typeWindow(v string) time.Duration {
	v = trimOWS(v)
	switch {
	case eqFold(v, "qps") || eqFold(v, "rps"):
		return time.Second
	case eqFold(v, "qpm") || eqFold(v, "rpm"):
		return time.Minute
	}
	if w, ok := cutSuffixFold(v, "-limit"); ok {
		v = w
	}
	if d, ok := periodName(v); ok && !isDigit(v[0]) {
		return d
	}
	return 0
}

// cutPrefixFold is strings.CutPrefix ignoring ASCII case; prefix must be
// lower case.
func cutPrefixFold(s, prefix string) (string, bool) {
	if hasPrefixFold(s, prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// cutSuffixFold is strings.CutSuffix ignoring ASCII case; suffix must be
// lower case.
func cutSuffixFold(s, suffix string) (string, bool) {
	if hasSuffixFold(s, suffix) {
		return s[:len(s)-len(suffix)], true
	}
	return s, false
}

// nonRequestUnits are the words that name, in a kind of X-RateLimit field,
// a quantity other than requests: a limit of it governs the wait when spent,
// but its count is not a request quota. "Token" alone is a credential
// (Trello's Api-Token), not a unit.
var nonRequestUnits = [...]string{"tokens", "complexity", "points", "cost", "credits", "bytes", "units", "concurrent", "concurrency"}

// maxPeriod bounds the length of a window stated as a number (Kong's
// X-RateLimit-Remaining-30, an Interval): a longer one is no window to pace
// by, and is ignored.
const maxPeriod = 366 * 24 * time.Hour

// periodName parses a window's name: Second, Minute, Hour, Day, Week, Month,
// Year (Kong) or their adjectives (Secondly, Daily, ...), a count and a unit
// such as 24hour or 15min, or a bare number of seconds (Kong's windows
// without a name, X-RateLimit-Limit-30). A window longer than maxPeriod is
// none.
func periodName(v string) (time.Duration, bool) {
	i := 0
	for i < len(v) && isDigit(v[i]) {
		i++
	}
	n := int64(1)
	if i > 0 {
		c, ok := parseCount(v[:i])
		if !ok || c == 0 {
			return 0, false
		}
		if i == len(v) {
			if c > int64(maxPeriod/time.Second) {
				return 0, false
			}
			return time.Duration(c) * time.Second, true
		}
		if c > 1000 {
			return 0, false
		}
		n = c
	}
	var unit time.Duration
	for _, u := range periodUnits {
		if eqFold(v[i:], u.name) {
			unit = u.unit
			break
		}
	}
	if unit == 0 {
		return 0, false
	}
	if n > int64(maxPeriod/unit) {
		return 0, false // a thousand years overflows a Duration
	}
	return time.Duration(n) * unit, true
}

// periodUnits are the units periodName knows, lower case.
var periodUnits = [...]struct {
	name string
	unit time.Duration
}{
	{"second", time.Second}, {"secondly", time.Second}, {"sec", time.Second}, {"s", time.Second},
	{"minute", time.Minute}, {"minutely", time.Minute}, {"min", time.Minute}, {"m", time.Minute},
	{"hour", time.Hour}, {"hourly", time.Hour}, {"h", time.Hour},
	{"day", 24 * time.Hour}, {"daily", 24 * time.Hour}, {"d", 24 * time.Hour},
	{"week", 7 * 24 * time.Hour}, {"weekly", 7 * 24 * time.Hour},
	{"month", 30 * 24 * time.Hour}, {"monthly", 30 * 24 * time.Hour},
	{"year", 365 * 24 * time.Hour}, {"yearly", 365 * 24 * time.Hour},
}

// parsePeriod parses the length of a window: a number of seconds, or a
// duration with its unit ("600s", "1m"). A window of no length, or of more
// than maxPeriod, is none.
func parsePeriod(v string) (time.Duration, bool) {
	v = trimOWS(v)
	d, ok := parseSeconds(v)
	if !ok && v != "" && isDigit(v[0]) {
		if pd, err := time.ParseDuration(v); err == nil {
			d, ok = pd, true
		}
	}
	if !ok || d <= 0 || d > maxPeriod {
		return 0, false
	}
	return d, true
}

// parseDurationPeriod parses the length of a window that must state its
// unit ("10s", "1m"), bounded as parsePeriod's: a bare number under a name
// that does not say its unit is ambiguous (ImageKit's X-RateLimit-Interval
// counts milliseconds, where most fields count seconds), and ignored.
func parseDurationPeriod(v string) (time.Duration, bool) {
	if _, ok := parseSeconds(v); ok {
		return 0, false
	}
	return parsePeriod(v)
}

// parsePeriodMillis parses the length of a window in milliseconds, bounded
// as parsePeriod's.
func parsePeriodMillis(v string) (time.Duration, bool) {
	d, ok := parseMillis(v)
	if !ok || d <= 0 || d > maxPeriod {
		return 0, false
	}
	return d, true
}

// firstItem returns the first member of a field, or "".
func firstItem(vs []string) string {
	var b [2]string
	if items := fieldItems(b[:0], vs); len(items) > 0 {
		return items[0]
	}
	return ""
}

// linearDialect recognises Linear's rate limits, which its GraphQL API
// answers with a 400 whose error has the code RATELIMITED (the
// X-RateLimit-Requests-* fields are read by the X-RateLimit dialect).
type linearDialect struct{}

func (linearDialect) String() string { return "linear" }

// Parse reads in into s (see Dialect).
func (d linearDialect) Parse(in *Input, s *Signal) { d.parse(newInput(in), s) }

func (linearDialect) parse(in *input, s *Signal) {
	if in.Status == http.StatusBadRequest && in.has(famXRateLimit) {
		if v, isString, ok := jsonValue(in.Body, "code"); ok && isString && string(v) == "RATELIMITED" {
			s.Throttled = true
		}
	}
}

// githubDialect recognises GitHub's rate limits among its 403s: a primary
// limit answers 403 with x-ratelimit-remaining: 0, a secondary limit 403 with
// retry-after (read before the dialects run) or a message saying so. Any
// other 403 is not a rate limit. A secondary limit without retry-after waits
// the one minute GitHub's documentation asks for.
type githubDialect struct{}

func (githubDialect) String() string { return "github" }

// Parse reads in into s (see Dialect).
func (d githubDialect) Parse(in *Input, s *Signal) { d.parse(newInput(in), s) }

func (githubDialect) parse(in *input, s *Signal) {
	if in.Status != http.StatusForbidden {
		return
	}
	n, ok := minCount(in.Header["X-Ratelimit-Remaining"])
	exhausted := ok && n == 0
	secondary := containsFold(in.Body, "exceeded a secondary rate limit")
	if exhausted || secondary || containsFold(in.Body, "rate limit exceeded") {
		s.Throttled = true
	}
	if secondary && !s.HasWait {
		s.AddRetryAfter(time.Minute)
	}
}

// discordDialect reads Discord's scope (X-RateLimit-Global: true,
// X-RateLimit-Scope: global) and the JSON body of its 429s: "global": true,
// and a delay, Discord's precise retry_after and the others' (see
// delayKind), in seconds or, where the response shows it, in
// milliseconds (see bodyDelay).
type discordDialect struct{}

func (discordDialect) String() string { return "discord" }

// Parse reads in into s (see Dialect).
func (d discordDialect) Parse(in *Input, s *Signal) { d.parse(newInput(in), s) }

func (discordDialect) parse(in *input, s *Signal) {
	if in.has(famXRateLimit) {
		if hasItem(in.Header["X-Ratelimit-Global"], "true") || hasItem(in.Header["X-Ratelimit-Scope"], "global") {
			s.Scope = ScopeGlobal
		}
	}
	if in.Status != http.StatusTooManyRequests || len(in.Body) == 0 {
		return
	}
	// The first delay of each kind the body names, read in this order:
	// the bare delay, then those whose names say their unit.
	var (
		vals  [3][]byte
		found [3]bool
	)
	jsonMembers(in.Body, func(key, val []byte, isString bool) bool {
		if isString {
			return true
		}
		if k, ok := delayKind(key); ok && !found[k] {
			vals[k], found[k] = val, true
		}
		return true
	})
	for k, v := range vals {
		if !found[k] {
			continue
		}
		n, frac, ok := parseNumber(string(v))
		if !ok {
			continue
		}
		switch k {
		case delayBare:
			bodyDelay(in, s, n, frac, allDigits(string(v)))
		case delaySeconds:
			s.refineRetryAfter(toDuration(n, frac, time.Second)) // its name says
		case delayMillis:
			s.refineRetryAfter(toDuration(n, frac, time.Millisecond)) // its name says
		}
	}
	if v, isString, ok := jsonValue(in.Body, "global"); ok && !isString && string(v) == "true" {
		s.Scope = ScopeGlobal
	}
}

// bodyDelay records the delay n.frac a 429's body states. It counts
// seconds (Discord since API v8, Telegram, Dropbox, monday.com), unless the
// response itself shows it to count milliseconds, as Discord's before v8
// and PluralKit's do (Discord API docs before v8, Rate Limits: retry_after,
// "the number of milliseconds to wait", 6457 beside X-RateLimit-Reset-After:
// 7; PluralKit API reference, Rate Limiting: retry_after, "the amount of
// milliseconds remaining until you can make more requests"): n is written
// as a whole number (whole), a window the X-RateLimit fields say is spent resets within a
// second of n milliseconds, and n seconds is more than a second beyond that
// reset. A delay the window bounds is not one the same response states a
// thousand times longer. Discord before v8 also sent its Retry-After in
// milliseconds: a stated delay of n seconds, as the body's n, is then
// replaced, not kept as the longer.
//
// A Retry-After the response states shows the unit too: a whole n that
// agrees with it to within a second as milliseconds, and is more than a
// second longer as seconds, counts milliseconds (Retry-After: 2 beside
// "retryAfter": 2000, as servers that keep milliseconds in their bodies
// send). The same delay stated twice is not read as one a thousand times
// longer, which would hand a 2-second throttle back as a half-hour one.
//
// Without a spent window or a Retry-After to measure it against (Discord's
// global limit before v8), n counts seconds, unless Input.MillisecondDelays
// says the server's delays count milliseconds (as its earlier answers
// showed: see Signal.MillisecondDelay).
func bodyDelay(in *input, s *Signal, n uint64, frac uint32, whole bool) {
	sec := toDuration(n, frac, time.Second)
	if whole && in.MillisecondDelays {
		// The server's delays count milliseconds (see Input): the
		// header's, read so too, agrees. A longer delay the header
		// states in seconds (a date, a fraction) governs, and is none
		// read in milliseconds.
		ms := toDuration(n, 0, time.Millisecond)
		s.refineRetryAfter(ms)
		if s.Wait == ms {
			s.MillisecondDelay = true
		}
		return
	}
	if whole && s.RetryAfter && sec > s.Wait+time.Second {
		// Milliseconds beside a Retry-After in seconds: the body's unit,
		// not the server's (MillisecondDelay stays unset).
		ms := toDuration(n, 0, time.Millisecond)
		if d := ms - s.Wait; d >= -time.Second && d <= time.Second {
			s.refineRetryAfter(ms)
			return
		}
	}
	if !whole || !in.hasSpent || sec <= in.spent+time.Second {
		bodySeconds(s, sec)
		return
	}
	ms := toDuration(n, 0, time.Millisecond)
	if ms > in.spent+time.Second {
		bodySeconds(s, sec)
		return
	}
	if s.RetryAfter && s.Wait == sec {
		s.Wait = ms // the same number, stated in milliseconds twice
	} else {
		s.refineRetryAfter(ms)
	}
	// The delay is the one read in milliseconds, not a longer one the
	// header stated in seconds.
	s.MillisecondDelay = s.Wait == ms
}

// bodySeconds records sec, a delay a 429's body states in seconds: the
// delay is then no longer one read in milliseconds, if it wins.
func bodySeconds(s *Signal, sec time.Duration) {
	s.refineRetryAfter(sec)
	if s.Wait == sec {
		s.MillisecondDelay = false
	}
}

// The kinds of delay a 429's body states (see delayKind).
const (
	delayBare    = iota // retry_after: seconds, or milliseconds where the response shows it (see bodyDelay)
	delaySeconds        // retry_in_seconds, retry-seconds: seconds, as the name says
	delayMillis         // retry_after_ms: milliseconds, as the name says
)

// delayKind reports whether a JSON member's name, in a 429's body, states
// how long to wait, and in which unit. Names are compared ignoring case
// and the '_' and '-' between words, so that one rule reads every spelling
// of them: retry, then after or in, then the unit, which only retry after
// may leave out:
//
//   - retry_after, retry-after, retryAfter: the bare delay, in seconds as
//     Discord (since API v8), Telegram (parameters.retry_after), Dropbox
//     (RateLimitError), Zulip (RATE_LIMIT_HIT, a decimal) and Salesforce
//     Marketing Cloud (retryAfter) state it, or in milliseconds where the
//     response shows it (see bodyDelay);
//   - a unit of seconds (s, sec, secs, second, seconds): retry_in_seconds
//     (monday.com's errors[].extensions, API changelog, Updated complexity
//     budget exhausted error), retry-seconds (Mailgun's 429, API reference
//     of the domains endpoints: {"retry-seconds": 60}), retry_after_seconds;
//   - a unit of milliseconds (ms, msec, millis, milliseconds):
//     retry_after_ms (Matrix's M_LIMIT_EXCEEDED, Client-Server API, Rate
//     limiting; deprecated since v1.10 in favour of Retry-After, beside
//     which it is the finer statement).
//
// So does a unit, then before next: msBeforeNext, in milliseconds
// (rate-limiter-flexible's field, which Segment's Public API returns on a
// 429 as data.msBeforeNext, docs.segmentapis.com, Rate Limits).
//
// A bare retry, a count of retries (retries, retry_count), or a unit the
// rule does not know names no delay. A delay stated as a string, or with a
// sign or an exponent, is ignored by the caller.
func delayKind(key []byte) (kind int, ok bool) {
	var buf [32]byte
	n := 0
	for _, c := range key {
		switch {
		case c == '_' || c == '-':
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case 'a' <= c && c <= 'z':
		default:
			return 0, false
		}
		if n == len(buf) {
			return 0, false
		}
		buf[n] = c
		n++
	}
	name, found := strings.CutPrefix(string(buf[:n]), "retry")
	if !found {
		// The unit, then before next: msBeforeNext, the milliseconds until
		// the next request may go (rate-limiter-flexible's RateLimiterRes,
		// which Segment's Public API 429 returns as data.msBeforeNext).
		if unit, ok := strings.CutSuffix(string(buf[:n]), "beforenext"); ok {
			return unitKind(unit)
		}
		return 0, false
	}
	after := false
	if rest, ok := strings.CutPrefix(name, "after"); ok {
		name, after = rest, true
	} else if rest, ok := strings.CutPrefix(name, "in"); ok {
		name = rest
	}
	if name == "" {
		return delayBare, after
	}
	return unitKind(name)
}

// unitKind returns the kind of a delay whose name states its unit, unit,
// lower case.
func unitKind(unit string) (kind int, ok bool) {
	switch unit {
	case "s", "sec", "secs", "second", "seconds":
		return delaySeconds, true
	case "ms", "msec", "millis", "milliseconds":
		return delayMillis, true
	}
	return 0, false
}

// openAIDialect recognises a billing error that OpenAI (and Azure OpenAI)
// answer with a 429: "insufficient_quota" or "billing_hard_limit_reached" as
// the error's type or code. Waiting does not cure it: not retryable.
type openAIDialect struct{}

func (openAIDialect) String() string { return "openai" }

// Parse reads in into s (see Dialect).
func (d openAIDialect) Parse(in *Input, s *Signal) { d.parse(newInput(in), s) }

func (openAIDialect) parse(in *input, s *Signal) {
	if in.Status != http.StatusTooManyRequests || len(in.Body) == 0 {
		return
	}
	for _, key := range [...]string{"code", "type"} {
		if v, isString, ok := jsonValue(in.Body, key); ok && isString {
			if c := string(v); c == "insufficient_quota" || c == "billing_hard_limit_reached" {
				s.Permanent = true
			}
		}
	}
}

// anthropicDialect reads anthropic-ratelimit-{requests,tokens,input-tokens,
// output-tokens}-{limit,remaining,reset}, resets as RFC 3339 timestamps.
// It also knows the 429s (and 400s) Anthropic sends for what money, not
// time, cures: a spend limit reached ("You have reached your specified API
// usage limits"), a credit balance too low, a billing_error, or long
// context requests that need extra usage bought ("Extra usage is required
// for long context requests", sent as a rate_limit_error): not retryable,
// and not a reason to slow down.
type anthropicDialect struct{}

func (anthropicDialect) String() string { return "anthropic" }

var anthropicKinds = [...]string{"Requests", "Tokens", "Input-Tokens", "Output-Tokens"}

// anthropicBilling are the words, lower case, of Anthropic's rejections
// that waiting does not cure.
var anthropicBilling = [...]string{
	"specified api usage limits", "credit balance is too low", `"billing_error"`,
	"extra usage is required", "usage credits are required",
}

// Parse reads in into s (see Dialect).
func (d anthropicDialect) Parse(in *Input, s *Signal) { d.parse(newInput(in), s) }

func (anthropicDialect) parse(in *input, s *Signal) {
	if len(in.Body) > 0 && (in.Status == http.StatusTooManyRequests || in.Status == http.StatusBadRequest ||
		in.Status == http.StatusPaymentRequired) {
		for _, w := range anthropicBilling {
			if containsFold(in.Body, w) {
				s.Permanent = true
				break
			}
		}
	}
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

// Parse reads in into s (see Dialect).
func (d shopifyDialect) Parse(in *Input, s *Signal) { d.parse(newInput(in), s) }

func (shopifyDialect) parse(in *input, s *Signal) {
	if !in.has(famShopify) {
		return
	}
	var (
		w window
		b [4]string
	)
	for _, v := range fieldItems(b[:0], in.Header["X-Shopify-Shop-Api-Call-Limit"]) {
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

// Parse reads in into s (see Dialect).
func (d hubSpotDialect) Parse(in *Input, s *Signal) { d.parse(newInput(in), s) }

func (hubSpotDialect) parse(in *input, s *Signal) {
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
// Zendesk-RateLimit-Tickets-Index: total=100; remaining=99; resets=41, each
// a window of its own (see keyedWindow). Its account-wide limit comes as
// X-Rate-Limit and the IETF -06 fields, read by the other dialects.
type zendeskDialect struct{}

func (zendeskDialect) String() string { return "zendesk" }

// Parse reads in into s (see Dialect).
func (d zendeskDialect) Parse(in *Input, s *Signal) { d.parse(newInput(in), s) }

func (zendeskDialect) parse(in *input, s *Signal) {
	if !in.has(famZendesk) {
		return
	}
	for k, vs := range in.Header {
		if !strings.HasPrefix(k, "Zendesk-Ratelimit-") {
			continue
		}
		for _, v := range vs {
			w, period := keyedWindow(v)
			w.add(s, period, "")
		}
	}
}

// quotaLimitDialect reads the fields named <vendor>[-<scope>]-Quota-Limit
// whose value lists windows, separated by commas, each a list of key=value
// members separated by semicolons (see keyedWindow): Auth0's token quotas,
// Auth0-Client-Quota-Limit and Auth0-Organization-Quota-Limit
// (b=per_hour;q=10;r=7;t=3540,b=per_day;q=50;r=47;t=43200: the bucket's
// name, its quota, what is left of it and the seconds until it resets; Auth0
// docs, Fine-grained M2M token quotas, on the Client Credentials responses,
// 2xx and 429). Each window is one of the response's; a spent one governs
// the wait. A value that is not such a list says nothing.
type quotaLimitDialect struct{}

func (quotaLimitDialect) String() string { return "quota-limit" }

// Parse reads in into s (see Dialect).
func (d quotaLimitDialect) Parse(in *Input, s *Signal) { d.parse(newInput(in), s) }

func (quotaLimitDialect) parse(in *input, s *Signal) {
	if !in.has(famQuota) {
		return
	}
	var b [4]string
	for k, vs := range in.Header {
		if !strings.HasSuffix(k, "-Quota-Limit") {
			continue
		}
		for _, item := range fieldItems(b[:0], vs) {
			w, period := keyedWindow(item)
			w.add(s, period, "")
		}
	}
}

// keyedWindow reads one window stated as a list of key=value members,
// separated by semicolons or commas, as Zendesk's per-endpoint fields are
// (Zendesk API reference, Rate limits: Zendesk-RateLimit-Tickets-Index:
// total=100; remaining=99; resets=10) and Auth0's quota buckets are
// (b=per_hour;q=10;r=7;t=3540), keys in any case: total, limit or q (the
// IETF draft's name for a quota), remaining or r, and resets, reset or t in
// seconds; b or name names the window, and the window's length when the name
// ends with one (per_hour, per_day; see splitWindowWord). Other keys are
// skipped, malformed values ignored, and so is a reset beyond maxPeriod,
// which is no window's; of a key given twice (two lines folded into one by
// a proxy) the most conservative value is kept.
func keyedWindow(v string) (w window, period time.Duration) {
	for len(v) > 0 {
		i := strings.IndexAny(v, ";,")
		part := v
		if i >= 0 {
			part, v = v[:i], v[i+1:]
		} else {
			v = ""
		}
		key, val, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		key, val = trimOWS(key), trimOWS(val)
		switch {
		case eqFold(key, "total") || eqFold(key, "limit") || eqFold(key, "q"):
			if n, ok := parseCount(val); ok && (!w.hasLimit || n < w.limit) {
				w.limit, w.hasLimit = n, true
			}
		case eqFold(key, "remaining") || eqFold(key, "r"):
			if n, ok := parseCount(val); ok && (!w.hasRem || n < w.remaining) {
				w.remaining, w.hasRem = n, true
			}
		case eqFold(key, "resets") || eqFold(key, "reset") || eqFold(key, "t"):
			if d, ok := parseSeconds(val); ok && d <= maxPeriod {
				w.addReset(d, true)
			}
		case eqFold(key, "b") || eqFold(key, "name"):
			if _, p := splitWindowWord(val); p > period {
				period = p
			}
		}
	}
	return w, period
}

// stripeDialect reads Stripe-Should-Retry: false, Stripe's word that a
// request must not be retried, and Stripe-Rate-Limited-Reason, which names
// the limit a 429 met (global-rate, endpoint-rate, global-concurrency,
// endpoint-concurrency, resource-specific). Two 429s are not the account's
// rate: lock_timeout (another
// request holds the same object) and resource-specific (too many updates
// of one object): they are contention on one object, not throttled, so
// they are retried after a backoff without slowing the key down.
type stripeDialect struct{}

func (stripeDialect) String() string { return "stripe" }

// Parse reads in into s (see Dialect).
func (d stripeDialect) Parse(in *Input, s *Signal) { d.parse(newInput(in), s) }

func (stripeDialect) parse(in *input, s *Signal) {
	if in.has(famStripe) {
		if hasItem(in.Header["Stripe-Should-Retry"], "false") {
			s.Permanent = true
		}
		if r := firstItem(in.Header["Stripe-Rate-Limited-Reason"]); r != "" {
			if in.Status == http.StatusTooManyRequests && strings.EqualFold(r, "resource-specific") {
				s.Throttled = false
			}
		}
	}
	if in.Status == http.StatusTooManyRequests && len(in.Body) > 0 {
		if v, isString, ok := jsonValue(in.Body, "code"); ok && isString && string(v) == "lock_timeout" {
			s.Throttled = false
		}
	}
}

// salesforceDialect reads Sforce-Limit-Info, the API requests an org has
// used of its rolling 24-hour allocation (api-usage=18/5000) and those of
// one connected app (per-app-api-usage=17/250(appName=sample-app)), and
// recognises Salesforce's 403 REQUEST_LIMIT_EXCEEDED as a rate limit. It
// names no wait: a rolling window frees requests as old ones age out.
type salesforceDialect struct{}

func (salesforceDialect) String() string { return "salesforce" }

// Parse reads in into s (see Dialect).
func (d salesforceDialect) Parse(in *Input, s *Signal) { d.parse(newInput(in), s) }

func (salesforceDialect) parse(in *input, s *Signal) {
	if in.Status == http.StatusForbidden && containsFold(in.Body, "request_limit_exceeded") {
		s.Throttled = true
	}
	if !in.has(famSalesforce) {
		return
	}
	var b [4]string
	for _, item := range fieldItems(b[:0], in.Header["Sforce-Limit-Info"]) {
		name, val, ok := strings.Cut(item, "=")
		if !ok {
			continue
		}
		if name = trimOWS(name); name != "api-usage" && name != "per-app-api-usage" {
			continue
		}
		if i := strings.IndexByte(val, '('); i >= 0 {
			val = val[:i]
		}
		used, limit, ok := strings.Cut(val, "/")
		if !ok {
			continue
		}
		u, ok1 := parseCount(used)
		l, ok2 := parseCount(limit)
		if ok1 && ok2 && l > 0 {
			s.AddQuota(Quota{Remaining: max(l-u, 0), Limit: l, Period: 24 * time.Hour})
		}
	}
}

// atlassianDialect reads RateLimit-Reason, which names the limit an
// Atlassian Cloud 429 met (jira-quota-tenant-based, jira-burst-based,
// jira-per-issue-on-write, ...). A per-issue write
// limit is contention on one issue, not the key's rate: not throttled, so
// the request is retried after its Retry-After without pausing the key.
// X-RateLimit-NearLimit (less than a fifth of the quota left) states no
// figure and is not read; Beta-RateLimit and the X-RateLimit-* fields are
// read by the IETF and X-RateLimit dialects.
type atlassianDialect struct{}

func (atlassianDialect) String() string { return "atlassian" }

// Parse reads in into s (see Dialect).
func (d atlassianDialect) Parse(in *Input, s *Signal) { d.parse(newInput(in), s) }

func (atlassianDialect) parse(in *input, s *Signal) {
	if !in.has(famIETF) {
		return
	}
	r := firstItem(in.Header["Ratelimit-Reason"])
	if r == "" {
		return
	}
	if in.Status == http.StatusTooManyRequests && containsFold([]byte(r), "per-issue") {
		s.Throttled = false
	}
}

// addLines returns the lines of a field gathered so far with vs added,
// never writing into the header's own slices.
func addLines(dst, vs []string) []string {
	if len(dst) == 0 {
		return vs
	}
	return append(dst[:len(dst):len(dst)], vs...)
}

// minCount returns the smallest valid count among the members of a field.
func minCount(vs []string) (int64, bool) {
	var (
		m     int64
		found bool
		b     [4]string
	)
	for _, v := range fieldItems(b[:0], vs) {
		if n, ok := parseCount(v); ok && (!found || n < m) {
			m, found = n, true
		}
	}
	return m, found
}

// maxCount returns the largest valid count among the members of a field.
func maxCount(vs []string) (int64, bool) {
	var (
		m     int64
		found bool
		b     [4]string
	)
	for _, v := range fieldItems(b[:0], vs) {
		if n, ok := parseCount(v); ok && (!found || n > m) {
			m, found = n, true
		}
	}
	return m, found
}

// maxReset returns the latest valid reset among the members of a field.
func maxReset(vs []string, in *input) (time.Duration, bool) {
	var (
		m     time.Duration
		found bool
		b     [4]string
	)
	for _, v := range fieldItems(b[:0], vs) {
		if d, ok := parseReset(v, in); ok && (!found || d > m) {
			m, found = d, true
		}
	}
	return m, found
}

// maxOf returns the longest valid duration among the members of a field.
func maxOf(vs []string, parse func(string) (time.Duration, bool)) (time.Duration, bool) {
	var (
		m     time.Duration
		found bool
		b     [4]string
	)
	for _, v := range fieldItems(b[:0], vs) {
		if d, ok := parse(v); ok && (!found || d > m) {
			m, found = d, true
		}
	}
	return m, found
}

// hasItem reports whether a member of a field equals want, ignoring case.
func hasItem(vs []string, want string) bool {
	var b [4]string
	for _, v := range fieldItems(b[:0], vs) {
		if strings.EqualFold(v, want) {
			return true
		}
	}
	return false
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

// xAlias returns the kind and the field of a field whose name is a vendor's
// own spelling of the family's, or xNone: Bybit's X-Bapi-Limit,
// X-Bapi-Limit-Status (what is left) and X-Bapi-Limit-Reset-Timestamp (an
// epoch in milliseconds, the current time unless the limit is spent), one
// window per endpoint (Bybit API docs, Rate Limit Rules). k is canonical.
func xAlias(k string) (kind string, f xField) {
	switch k {
	case "X-Bapi-Limit":
		return "Bapi-", xLimit
	case "X-Bapi-Limit-Status":
		return "Bapi-", xRemaining
	case "X-Bapi-Limit-Reset-Timestamp":
		return "Bapi-", xReset
	}
	return "", xNone
}

// countdownSuffixes are the fields countdownName knows, canonical.
var countdownSuffixes = [...]struct {
	suffix string
	field  xField
}{
	{"-Calls-Left", xRemaining},
	{"-Seconds-Until-Full", xResetAfter},
	{"-Seconds-Until-Next-Refill", xNextRefill},
}

// countdownName returns the kind and the field of a field named
// X-<limiter>-Calls-Left, -Seconds-Until-Full or
// -Seconds-Until-Next-Refill, or xNone: Stack Overflow for Teams API v3
// (Rate Limiting and Throttling: x-burst-throttle-calls-left and
// x-burst-throttle-seconds-until-full, 50 requests in two seconds;
// x-token-bucket-calls-left, x-token-bucket-seconds-until-full and
// x-token-bucket-seconds-until-next-refill, a bucket of 5,000 refilled
// 100 every 60 seconds). Each limiter is a window of its own, the
// limiter's name its kind: what is left, the seconds until it is full
// again (its reset), and for a bucket the seconds until its next refill,
// which is when an empty one has requests again. k is canonical.
func countdownName(k string) (kind string, f xField) {
	if !strings.HasPrefix(k, "X-") {
		return "", xNone
	}
	for _, c := range countdownSuffixes {
		if kind, ok := strings.CutSuffix(k[len("X-"):], c.suffix); ok && kind != "" {
			return kind, c.field
		}
	}
	return "", xNone
}

// shareReset gives the reset the family states once, without a kind, to
// the kinds that state what is left of them but no reset of their own:
// LaunchDarkly's X-Ratelimit-Global-Remaining and
// X-Ratelimit-Route-Remaining share X-Ratelimit-Reset (LaunchDarkly REST
// API docs, Rate limiting: the global and the route-level limits, each
// resetting every ten seconds, the reset in epoch milliseconds). A reset
// that has its own remaining stays its own, and a kind that names a window
// of its own length (Kong's -Hour) does not take another's reset.
func shareReset(groups []xGroup) {
	var shared *xGroup
	for i := range groups {
		if groups[i].kind == "" {
			shared = &groups[i]
		}
	}
	if shared == nil || len(shared.lines[xRemaining])+len(shared.lines[xUsed]) > 0 {
		return
	}
	for i := range groups {
		g := &groups[i]
		if _, period := xKind(g.kind); period > 0 || g.period > 0 {
			continue // a window of its own length, whose reset may be another's
		}
		if g == shared || len(g.lines[xRemaining]) == 0 ||
			len(g.lines[xReset])+len(g.lines[xResetAfter])+len(g.lines[xResetMs]) > 0 {
			continue
		}
		for _, f := range [...]xField{xReset, xResetAfter, xResetMs} {
			g.lines[f] = shared.lines[f]
		}
	}
}

// jsonWindow reads a Limit field whose value is a JSON object describing
// one window, and reports whether it was one: Trakt's X-Ratelimit,
// {"name":"UNAUTHED_API_GET_LIMIT","period":300,"limit":1000,"remaining":0,
// "until":"2020-10-10T00:24:00Z"} (Trakt API docs, Rate Limits). Members
// limit, remaining, period (the window's length in seconds) and until or
// reset (any form a reset takes, see parseReset) give the window, name its
// Bucket; malformed members are ignored, and so is the window if what is
// left is not known. Of several lines the one with the fewest left counts.
func jsonWindow(vs []string, in *input, s *Signal) bool {
	found := false
	for _, v := range vs {
		v = trimOWS(v)
		if len(v) < 2 || v[0] != '{' {
			continue
		}
		found = true
		b := []byte(v)
		num := func(key string) (int64, bool) {
			if val, isString, ok := jsonValue(b, key); ok && !isString {
				return parseCount(string(val))
			}
			return 0, false
		}
		var q Quota
		rem, ok := num("remaining")
		if !ok {
			continue
		}
		q.Remaining = rem
		q.Limit, _ = num("limit")
		if val, isString, ok := jsonValue(b, "period"); ok && !isString {
			q.Period, _ = parsePeriod(string(val))
		}
		for _, key := range [...]string{"until", "reset"} {
			if val, _, ok := jsonValue(b, key); ok {
				if d, ok := parseReset(string(val), in); ok {
					q.Reset = max(q.Reset, d)
				}
			}
		}
		s.AddQuota(q)
		if val, isString, ok := jsonValue(b, "name"); ok && isString && s.Bucket == "" && len(val) <= 128 {
			s.Bucket = string(val)
		}
	}
	return found
}

// pairWindows records in s the windows a Limit field lists as
// <limit>:<seconds> pairs, and reports whether it listed any: Riot Games'
// X-App-Rate-Limit: 20:1,100:120, twenty requests a second and a hundred
// every two minutes, with X-App-Rate-Limit-Count: 3:1,97:120, the requests
// each window has counted, the windows paired by their lengths (Riot Games
// developer docs, Rate Limiting, archived at hextechdocs.dev/rate-limiting).
// What is left of a window is its limit less its count, never below zero;
// a window without a count is not known, and no reset is stated: a spent
// window names no wait, the 429's Retry-After does. Of counts of one
// window given twice the larger counts.
func pairWindows(s *Signal, lim, counts []string, unit string) bool {
	found := false
	for _, l := range lim {
		n, w, ok := parsePair(l)
		if !ok {
			continue
		}
		found = true
		var (
			used    int64
			counted bool
		)
		for _, c := range counts {
			if u, cw, ok := parsePair(c); ok && cw == w && (!counted || u > used) {
				used, counted = u, true
			}
		}
		if counted {
			s.AddQuota(Quota{Remaining: max(n-used, 0), Limit: n, Period: w, Unit: unit})
		}
	}
	return found
}

// parsePair parses <count>:<seconds>, a count and a window's length (see
// pairWindows).
func parsePair(v string) (n int64, w time.Duration, ok bool) {
	c, secs, ok := strings.Cut(v, ":")
	if !ok {
		return 0, 0, false
	}
	n, ok1 := parseCount(c)
	w, ok2 := parsePeriod(secs)
	return n, w, ok1 && ok2
}
