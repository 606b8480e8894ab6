package ratelimitheader

import (
	"encoding/base64"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
)

// ietfDialect reads the IETF rate-limit fields of
// draft-ietf-httpapi-ratelimit-headers, in all the shapes servers send:
//
//   - -08 to -11: RateLimit and RateLimit-Policy, Structured Field Lists of
//     named policies (RFC 9651), e.g.
//     RateLimit-Policy: "burst";q=100;w=60 and RateLimit: "burst";r=99;t=59.
//     Names may be Strings or Tokens; q, w, qu are read on a policy, r, t
//     and pk on a limit; unknown parameters are ignored; a field split over
//     several lines is one list. A partition key (pk, a Byte Sequence)
//     names the quota the response speaks for: the signal's Bucket is the
//     limit's name and its key, "name;pk=:base64:". A field that does not parse is ignored
//     whole, a member with an invalid r or t is ignored alone.
//   - -07: RateLimit: limit=10, remaining=0, reset=10 (a Dictionary), with
//     RateLimit-Policy: 10;w=1 giving the window.
//   - -06 and Kong: separate RateLimit-Limit, RateLimit-Remaining and
//     RateLimit-Reset; GitLab's RateLimit-Reset as an epoch and
//     RateLimit-ResetTime as an HTTP-date.
//   - Yelp's names that join a scope and a window to the field's:
//     RateLimit-DailyLimit, RateLimit-ResourceDailyLimit and
//     RateLimit-ResourceRemaining, each scope a window of its own (see
//     joinedWindows).
//   - Atlassian's Beta-RateLimit and Beta-RateLimit-Policy, read as -11.
type ietfDialect struct{}

func (ietfDialect) String() string { return "ietf" }

// maxMembers bounds the members of a RateLimit or RateLimit-Policy field
// read: a field with more is ignored whole, like one that does not parse.
// A server states a few policies; thousands say nothing worth the time.
const maxMembers = 1024

// ietfPolicy is one member of RateLimit-Policy.
type ietfPolicy struct {
	name  string // "" for the unnamed Integer members of -06 and -07
	q     int64
	w     time.Duration
	unit  string
	named bool
}

// Parse reads in into s (see Dialect).
func (d ietfDialect) Parse(in *Input, s *Signal) { d.parse(newInput(in), s) }

func (ietfDialect) parse(in *input, s *Signal) {
	if !in.has(famIETF) {
		return
	}
	h := in.Header
	policies := ietfPolicies(firstField(h, "Ratelimit-Policy", "Beta-Ratelimit-Policy"))
	if lines := firstField(h, "Ratelimit", "Beta-Ratelimit"); len(lines) > 0 {
		if list, err := httpsfv.UnmarshalList(lines); err == nil && len(list) <= maxMembers {
			ietfLimits(list, policies, s)
		} else if dict, err := httpsfv.UnmarshalDictionary(lines); err == nil {
			ietfDictionary(dict, lines, policies, s)
		}
	}
	ietfSeparate(in, s)
	if !s.HasRemaining && s.Limit == 0 {
		// Policies but no live counters: report the slowest request policy.
		var slow *ietfPolicy
		for i := range policies {
			p := &policies[i]
			if p.w > 0 && isRequests(p.unit) && (slow == nil || float64(p.q)*float64(slow.w) < float64(slow.q)*float64(p.w)) {
				slow = p
			}
		}
		if slow != nil {
			s.Limit, s.Period = slow.q, slow.w
		}
	}
}

// firstField returns the lines of the first of the named fields present.
func firstField(h map[string][]string, names ...string) []string {
	for _, n := range names {
		if v := h[n]; len(v) > 0 {
			return v
		}
	}
	return nil
}

// ietfPolicies parses RateLimit-Policy; an invalid field gives none, an
// invalid member is skipped.
func ietfPolicies(lines []string) []ietfPolicy {
	if len(lines) == 0 {
		return nil
	}
	list, err := httpsfv.UnmarshalList(lines)
	if err != nil || len(list) > maxMembers {
		return nil
	}
	var out []ietfPolicy
	for _, m := range list {
		it, ok := m.(httpsfv.Item)
		if !ok {
			continue
		}
		var p ietfPolicy
		if n, isInt := it.Value.(int64); isInt {
			p.q = n // -06/-07: 10;w=1
		} else if p.name, p.named = sfName(it.Value); p.named {
			q, present, valid := intParam(it.Params, "q")
			if !present || !valid {
				continue
			}
			p.q = q
		} else {
			continue
		}
		if p.q < 0 {
			continue
		}
		w, present, valid := intParam(it.Params, "w")
		if present && (!valid || w == 0) {
			continue
		}
		p.w = toDuration(uint64(w), 0, time.Second)
		if u, ok := it.Params.Get("qu"); ok {
			if p.unit, ok = sfName(u); !ok {
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

// ietfLimits reads the RateLimit List of -08 to -11.
func ietfLimits(list httpsfv.List, policies []ietfPolicy, s *Signal) {
	var byName map[string]*ietfPolicy
	if len(policies) > 8 {
		// Many policies: look them up by name, so that a field of n
		// members costs O(n), not O(n²), however large a server sends it.
		byName = make(map[string]*ietfPolicy, len(policies))
		for i := range policies {
			if p := &policies[i]; p.named && byName[p.name] == nil {
				byName[p.name] = p // the first of a name, as the loop below
			}
		}
	}
	for _, m := range list {
		it, ok := m.(httpsfv.Item)
		if !ok {
			continue
		}
		name, ok := sfName(it.Value)
		if !ok {
			continue
		}
		r, present, valid := intParam(it.Params, "r")
		if !present || !valid {
			continue
		}
		t, present, valid := intParam(it.Params, "t")
		if present && !valid {
			continue
		}
		q := Quota{Remaining: r, Reset: toDuration(uint64(t), 0, time.Second)}
		if pk, ok := it.Params.Get("pk"); ok && s.Bucket == "" {
			if b, ok := pk.([]byte); ok && len(b) <= 64 {
				// The partition key names the quota this response speaks for.
				s.Bucket = name + ";pk=:" + base64.StdEncoding.EncodeToString(b) + ":"
			}
		}
		if byName != nil {
			if p := byName[name]; p != nil {
				q.Limit, q.Period, q.Unit = p.q, p.w, p.unit
			}
		} else {
			for _, p := range policies {
				if p.named && p.name == name {
					q.Limit, q.Period, q.Unit = p.q, p.w, p.unit
					break
				}
			}
		}
		s.AddQuota(q)
	}
}

// ietfDictionary reads the RateLimit Dictionary of -07.
// A key sent twice (lines folded by a proxy) would keep its last value
// only; the most conservative is taken instead.
func ietfDictionary(d *httpsfv.Dictionary, lines []string, policies []ietfPolicy, s *Signal) {
	get := func(k string) (int64, bool, bool) {
		m, ok := d.Get(k)
		if !ok {
			return 0, false, false
		}
		it, ok := m.(httpsfv.Item)
		if !ok {
			return 0, true, false
		}
		n, ok := it.Value.(int64)
		return n, true, ok && n >= 0
	}
	r, present, valid := get("remaining")
	if !present || !valid {
		return
	}
	q := Quota{Remaining: r}
	if t, present, valid := get("reset"); present {
		if !valid {
			return
		}
		q.Reset = toDuration(uint64(t), 0, time.Second)
	}
	if l, present, valid := get("limit"); present && valid {
		q.Limit = l
	}
	dictFolded(lines, &q)
	for _, p := range policies {
		if q.Limit > 0 && !p.named && p.q == q.Limit {
			q.Period = p.w
			break
		}
	}
	s.AddQuota(q)
}

// dictFolded makes q the most conservative of the members of a -07
// Dictionary whose keys repeat (the lowest remaining and limit, the latest
// reset), and reports whether any did; members that are not an Integer
// are skipped, q already holding the last of each, which the Dictionary
// proved valid.
func dictFolded(lines []string, q *Quota) bool {
	var b [8]string
	items := fieldItems(b[:0], lines)
	var seen [3]int
	for _, item := range items {
		k, _, _ := strings.Cut(item, "=")
		switch trimOWS(k) {
		case "remaining":
			seen[0]++
		case "reset":
			seen[1]++
		case "limit":
			seen[2]++
		}
	}
	if seen[0] < 2 && seen[1] < 2 && seen[2] < 2 {
		return false
	}
	for _, item := range items {
		k, v, _ := strings.Cut(item, "=")
		v, _, _ = strings.Cut(v, ";")
		if !allDigits(trimOWS(v)) {
			continue
		}
		n, ok := parseCount(v)
		if !ok {
			continue
		}
		switch trimOWS(k) {
		case "remaining":
			q.Remaining = min(q.Remaining, n)
		case "reset":
			q.Reset = max(q.Reset, toDuration(uint64(n), 0, time.Second))
		case "limit":
			q.Limit = min(q.Limit, n)
		}
	}
	return true
}

// ietfSeparate reads the separate fields of -06, Kong and GitLab. A count
// may carry its window as a parameter, as early drafts wrote a policy
// (Docker Hub's RateLimit-Remaining: 76;w=21600). Fields whose names join a
// scope or a window to Limit and Remaining (Yelp's) are read too, see
// joinedWindows.
func ietfSeparate(in *input, s *Signal) {
	h := in.Header
	var reset time.Duration
	if d, ok := maxReset(h["Ratelimit-Reset"], in); ok {
		reset = d
	} else if d, ok := maxReset(h["Ratelimit-Resettime"], in); ok {
		reset = d
	}
	var jb [maxJoined]joinedWindow
	joined := joinedWindows(jb[:0], h)
	for i := range joined {
		if j := &joined[i]; j.hasRem {
			s.AddQuota(Quota{Remaining: j.rem, Reset: reset, Limit: j.limit, Period: j.period})
		}
	}
	r, ok := minCount(h["Ratelimit-Remaining"])
	var window time.Duration // the w of the remaining count, if it has one
	if !ok && hasParams(h["Ratelimit-Remaining"]) {
		for _, p := range ietfPolicies(h["Ratelimit-Remaining"]) {
			if !p.named && (!ok || p.q < r) {
				r, ok, window = p.q, true, p.w
			}
		}
	}
	if !ok {
		return
	}
	q := Quota{Remaining: r, Reset: reset}
	if pols := ietfPolicies(h["Ratelimit-Limit"]); len(pols) > 0 && !pols[0].named && hasParams(h["Ratelimit-Limit"]) {
		// Early drafts: RateLimit-Limit: 10, 10;w=1, 1000;w=3600: the
		// limit, then the policies, the one of the same size giving its
		// window; or the limit with its own (100;w=21600).
		q.Limit = pols[0].q
		for _, p := range pols {
			if p.q == q.Limit && p.w > 0 {
				q.Period = p.w
				break
			}
		}
	} else if l, ok := minCount(h["Ratelimit-Limit"]); ok {
		q.Limit = l
	}
	if q.Period == 0 {
		q.Period = window
	}
	for _, j := range joined {
		if j.scope == "" && j.hasLimit && q.Limit == 0 {
			// RateLimit-DailyLimit: the size and window of RateLimit-Remaining's.
			q.Limit, q.Period = j.limit, max(q.Period, j.period)
		}
	}
	s.AddQuota(q)
}

// joinedWindow is one window of fields whose names join its scope and
// window to the field's name (see joinedWindows).
type joinedWindow struct {
	scope            string
	limit, rem       int64
	period           time.Duration
	hasLimit, hasRem bool
}

// maxJoined bounds the joined windows read from one response.
const maxJoined = 4

// joinedWindows appends to dst the windows of the fields whose names join
// a scope, a window or both to Limit or Remaining without a hyphen, as
// Yelp's do (Places API, Rate Limiting: RateLimit-DailyLimit,
// RateLimit-Remaining, RateLimit-ResourceDailyLimit,
// RateLimit-ResourceRemaining, RateLimit-ResetTime):
// RateLimit-<scope><window>Limit and RateLimit-<scope><window>Remaining,
// the window's name (Daily, Hour, Minute, ...; see windowWords) the
// window's Period. Each scope is a window of its own, reset when the
// field's RateLimit-Reset or RateLimit-ResetTime says; the scope "" is
// -06's own window, whose Limit and Period a RateLimit-DailyLimit states.
// h's keys are canonical; counts are validated as every count is.
func joinedWindows(dst []joinedWindow, h map[string][]string) []joinedWindow {
	for k, vs := range h {
		rest, ok := strings.CutPrefix(k, "Ratelimit-")
		if !ok || strings.IndexByte(rest, '-') >= 0 {
			continue
		}
		word, isLimit := "", false
		switch {
		case len(rest) > len("remaining") && strings.HasSuffix(rest, "remaining"):
			word = rest[:len(rest)-len("remaining")]
		case len(rest) > len("limit") && strings.HasSuffix(rest, "limit"):
			word, isLimit = rest[:len(rest)-len("limit")], true
		default:
			continue
		}
		n, ok := minCount(vs)
		if !ok {
			continue
		}
		scope, period := splitWindowWord(word)
		if period == 0 {
			scope = word
		}
		var j *joinedWindow
		dst, j = member(dst, maxJoined, scope, func(j *joinedWindow) string { return j.scope },
			func() joinedWindow { return joinedWindow{scope: scope} })
		if j == nil {
			continue
		}
		j.period = max(j.period, period)
		switch {
		case isLimit && (!j.hasLimit || n < j.limit):
			j.limit, j.hasLimit = n, true
		case !isLimit && (!j.hasRem || n < j.rem):
			j.rem, j.hasRem = n, true
		}
	}
	return dst
}

// hasParams reports whether a field's lines hold a parameter (";").
func hasParams(vs []string) bool {
	for _, v := range vs {
		if strings.IndexByte(v, ';') >= 0 {
			return true
		}
	}
	return false
}

// sfName returns a policy name or unit given as a String or a Token.
func sfName(v any) (string, bool) {
	switch n := v.(type) {
	case string:
		return n, true
	case httpsfv.Token:
		return string(n), true
	}
	return "", false
}

// intParam returns the parameter k; valid means it is a non-negative
// Integer.
func intParam(p *httpsfv.Params, k string) (n int64, present, valid bool) {
	if p == nil {
		return 0, false, false
	}
	v, present := p.Get(k)
	if !present {
		return 0, false, false
	}
	n, valid = v.(int64)
	return n, true, valid && n >= 0
}

func isRequests(unit string) bool { return unit == "" || unit == "requests" }
