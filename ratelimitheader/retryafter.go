package ratelimitheader

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// maxDuration is where durations saturate instead of overflowing.
const maxDuration = time.Duration(math.MaxInt64)

// readRetryAfter records Retry-After (RFC 9110 10.2.3) and its variants.
// Of several Retry-After lines the longest valid delay wins; a millisecond
// field (retry-after-ms, x-ms-retry-after-ms) then refines it.
//
// Beta-Retry-After, the field under the Beta- prefix that marks Atlassian
// Cloud's limits on trial (as Beta-RateLimit does), states the delay of a
// limit that may not be enforced yet: it is read, as Retry-After is, only
// when the response states no Retry-After. A 429 of an enforced limit
// (Jira's burst limit) carries its own Retry-After, which governs; a
// would-be delay beside it does not make the client wait longer, or give up.
func readRetryAfter(in *input, s *Signal) {
	if !in.has(famRetryAfter) {
		return
	}
	var buf [4]string
	for _, name := range [...]string{"Retry-After", "Beta-Retry-After"} {
		if s.RetryAfter {
			break
		}
		for _, v := range fieldItems(buf[:0], in.Header[name]) {
			if in.MillisecondDelays && in.Status == http.StatusTooManyRequests && allDigits(v) {
				// The server's delays count milliseconds (see Input).
				d, _ := parseMillis(v)
				s.AddRetryAfter(d)
				s.MillisecondDelay = true
				continue
			}
			if d, ok := parseRetryAfter(v, in); ok {
				s.AddRetryAfter(d)
			}
		}
	}
	ms, found := maxOf(in.Header["Retry-After-Ms"], parseMillis)
	if xms, ok := maxOf(in.Header["X-Ms-Retry-After-Ms"], parseMillis); ok {
		ms, found = max(ms, xms), true
	}
	if found {
		s.refineRetryAfter(ms)
	}
}

// parseRetryAfter parses one Retry-After value: delay-seconds (1*DIGIT, and
// leniently a decimal such as Shopify's "2.0") or an HTTP-date, measured
// against the server's clock; or, outside RFC 9110, an RFC 3339 timestamp
// with its zone, as Zoom sends on a spent daily limit
// ("2026-03-11T00:00:00Z"), measured the same way. A date in the past gives
// zero. Signs, exponents, NaN, underscores, other time zones, timestamps
// without a zone and empty values are invalid; huge values saturate.
func parseRetryAfter(v string, in *input) (time.Duration, bool) {
	v = trimOWS(v)
	if v == "" {
		return 0, false
	}
	if isDigit(v[0]) {
		n, frac, ok := parseNumber(v)
		if !ok {
			t, ok := parseRFC3339(v)
			if !ok {
				return 0, false
			}
			return untilTime(t, in.ServerTime()), true
		}
		return toDuration(n, frac, time.Second), true
	}
	t, ok := parseHTTPDate(v)
	if !ok {
		return 0, false
	}
	return untilTime(t, in.ServerTime()), true
}

// parseHTTPDate parses the three HTTP-date forms of RFC 9110 5.6.7:
// IMF-fixdate, the obsolete RFC 850 form and asctime, all in GMT.
func parseHTTPDate(v string) (time.Time, bool) {
	v = trimOWS(v)
	if len(v) < 24 {
		return time.Time{}, false
	}
	layout := time.ANSIC // asctime: "Mon Jan _2 15:04:05 2006"
	switch {
	case v[3] == ',':
		layout = time.RFC1123 // IMF-fixdate: "Mon, 02 Jan 2006 15:04:05 GMT"
		if !strings.HasSuffix(v, " GMT") {
			return time.Time{}, false
		}
	case strings.IndexByte(v, ',') > 0:
		layout = time.RFC850 // "Monday, 02-Jan-06 15:04:05 GMT"
		if !strings.HasSuffix(v, " GMT") {
			return time.Time{}, false
		}
	}
	t, err := time.Parse(layout, v)
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// parseRFC3339 parses an RFC 3339 timestamp with its zone, "Z" or a
// numeric offset, and a fraction or none ("2026-03-11T00:00:00Z",
// "2026-03-10T19:00:00.5-05:00"). Anything else, a date alone or a time
// without its zone among them, is invalid.
func parseRFC3339(v string) (time.Time, bool) {
	if len(v) < len("2006-01-02T15:04:05Z") || v[4] != '-' || v[10] != 'T' {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// untilTime returns how long after now t is: zero for a time in the past,
// saturated for one too far ahead.
func untilTime(t, now time.Time) time.Duration {
	return max(t.Sub(now), 0) // Sub saturates
}

// parseNumber parses 1*DIGIT ["." 1*DIGIT] after trimming spaces and tabs:
// the whole part, saturated at math.MaxUint64, and the first nine digits of
// the fraction in units of 1e-9. Anything else (signs, exponents, "NaN",
// underscores, ".5", "5.") is invalid.
func parseNumber(v string) (whole uint64, frac uint32, ok bool) {
	v = trimOWS(v)
	i := 0
	for ; i < len(v) && isDigit(v[i]); i++ {
		d := uint64(v[i] - '0')
		if whole > (math.MaxUint64-d)/10 {
			whole = math.MaxUint64
		} else {
			whole = whole*10 + d
		}
	}
	if i == 0 {
		return 0, 0, false
	}
	if i == len(v) {
		return whole, 0, true
	}
	if v[i] != '.' || i+1 == len(v) {
		return 0, 0, false
	}
	scale := uint32(100_000_000)
	for i++; i < len(v); i++ {
		if !isDigit(v[i]) {
			return 0, 0, false
		}
		frac += uint32(v[i]-'0') * scale
		scale /= 10
	}
	return whole, frac, true
}

// toDuration converts whole.frac units to a Duration, saturating at
// maxDuration.
func toDuration(whole uint64, frac uint32, unit time.Duration) time.Duration {
	if whole > uint64(maxDuration/unit) {
		return maxDuration
	}
	d := time.Duration(whole) * unit
	f := time.Duration(uint64(frac) * uint64(unit) / 1e9)
	if d > maxDuration-f {
		return maxDuration
	}
	return d + f
}

// parseCount parses a non-negative count such as a remaining quota. A
// decimal (Reddit's "599.0") is floored; huge values saturate.
func parseCount(v string) (int64, bool) {
	n, _, ok := parseNumber(v)
	if !ok {
		return 0, false
	}
	return int64(min(n, math.MaxInt64)), true
}

// parseReset parses a reset time as vendors send it and returns the time
// from receipt until it: a number of seconds, an epoch in seconds (possibly
// with a fraction) or in milliseconds, told apart by their magnitude next to
// the server's clock; a Go duration as OpenAI sends it ("6m0s", "547ms");
// an RFC 3339 timestamp, or one without seconds as Atlassian sends it
// ("2026-03-10T12:01Z"), or with a space and a numeric zone as Ruby's
// Time#to_s writes it (Gusto's "2025-07-08 15:35:40 -0700"); an HTTP-date;
// or, within the bounds naiveReset sets, a date-time without a zone.
func parseReset(v string, in *input) (time.Duration, bool) {
	v = trimOWS(v)
	if v == "" {
		return 0, false
	}
	if n, frac, ok := parseNumber(v); ok {
		return resetFromNumber(n, frac, in)
	}
	if isDigit(v[0]) && (len(v) < 10 || v[len(v)-1] == 's') {
		// Too short for a date, or ending in a unit: a Go duration, if
		// anything. ParseDuration rejects overflow; no sign can be here.
		if d, err := time.ParseDuration(v); err == nil {
			return d, true
		}
		return 0, false
	}
	// RFC 3339 (with or without seconds, a space for the T as its 5.6
	// allows), ISO 8601's offsets without a colon, Ruby's Time#to_s (a space
	// before the offset), and RFC 1123 with a numeric zone (PHP's date('r')).
	for _, layout := range [...]string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02 15:04:05.999999999Z07:00",
		"2006-01-02T15:04:05.999999999Z0700", "2006-01-02 15:04:05.999999999 -0700", time.RFC1123Z} {
		if t, err := time.Parse(layout, v); err == nil {
			return untilTime(t, in.ServerTime()), true
		}
	}
	if t, ok := parseHTTPDate(v); ok {
		return untilTime(t, in.ServerTime()), true
	}
	if t, ok := parseJSDate(v); ok {
		return untilTime(t, in.ServerTime()), true
	}
	// The same forms without a zone: parsed as UTC, kept only where that
	// reading cannot be another zone's.
	for _, layout := range [...]string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999",
		"2006-01-02T15:04", "2006-01-02 15:04"} {
		if t, err := time.Parse(layout, v); err == nil {
			return naiveReset(t, in)
		}
	}
	return 0, false
}

// naiveSlack and naiveHorizon bound the resets naiveReset accepts: from a
// minute before the server's clock to less than an hour after it, less the
// slack, so that no reading in the range can be a zone's an hour off.
const (
	naiveSlack   = time.Minute
	naiveHorizon = time.Hour - naiveSlack
)

// naiveReset returns the time until t, a date-time sent without a zone
// ("2026-03-10T12:01:00", "2026-03-10 12:01") and parsed as UTC.
//
// Such a time names no instant (RFC 3339 4.4): it is a wall clock in a zone
// the server does not say. Most servers that send one formatted UTC and
// dropped the "Z" (Python's datetime.utcnow().isoformat(), .NET's "s"
// format), but one that writes its local time is off by its zone's offset,
// and every offset but UTC's is an hour or more (in steps of 15 minutes).
// So the time is read as UTC only where no other zone could have meant it
// as a reset:
//
//   - the server's clock must be known, from a valid Date or
//     Input.ServerNow: against the local clock, a skew could pass for a
//     zone's offset, and the reverse;
//   - read as UTC, the reset must fall between naiveSlack (a minute) before
//     that clock, which gives zero, and naiveHorizon (59 minutes) after it.
//     A server an hour or more east of UTC writes its resets, even one just
//     past, at least 59 minutes ahead of UTC's: they fall beyond.
//
// Anything else is ignored, not guessed at: a longer reset (a daily
// window's), a reset further in the past (a server west of UTC, or a stale
// one), a response without a Date. What remains is a server west of UTC
// that names a reset at least as far ahead as its offset (one an hour
// behind UTC naming a reset 90 minutes off): its reset is read short by
// whole hours, never negative; the request it lets go early is answered
// with the next reset.
func naiveReset(t time.Time, in *input) (time.Duration, bool) {
	srv, known := in.serverClock()
	if !known {
		return 0, false
	}
	d := t.Sub(srv) // saturates
	if d < -naiveSlack || d >= naiveHorizon {
		return 0, false
	}
	return max(d, 0), true
}

// parseJSDate parses the form JavaScript's Date.prototype.toString gives,
// which servers written in it send as a reset (lemlist's X-RateLimit-Reset):
// "Tue Feb 16 2021 09:02:42 GMT+0100 (Central European Standard Time)",
// the zone's name in parentheses optional.
func parseJSDate(v string) (time.Time, bool) {
	if i := strings.IndexByte(v, '('); i > 0 && v[len(v)-1] == ')' {
		v = trimOWS(v[:i])
	}
	if len(v) != len("Mon Jan 02 2006 15:04:05 GMT-0700") {
		return time.Time{}, false
	}
	t, err := time.Parse("Mon Jan 02 2006 15:04:05 GMT-0700", v)
	return t, err == nil
}

// surelyDelta is where a reset stated as a number of seconds stops being
// a delta whatever the clock says: three years.
const surelyDelta = 100_000_000

// resetFromNumber tells a delta in seconds from an epoch in seconds or
// milliseconds. Relative to the server's clock S (in seconds, about 1.8e9 in
// 2026): below S/2 it is a delta (no window lasts decades), below 500·S
// epoch seconds (a date in the future, however far: a reset far beyond any
// cap is still a reset), below 30000·S epoch milliseconds (from a quarter of
// S ago on); beyond, nonsense.
func resetFromNumber(n uint64, frac uint32, in *input) (time.Duration, bool) {
	if n < surelyDelta {
		return toDuration(n, frac, time.Second), true
	}
	now := in.ServerTime()
	s := uint64(min(max(now.Unix(), 1_000_000_000), 1_000_000_000_000)) // clamped to years 2001..33658
	switch {
	case n < s/2:
		return toDuration(n, frac, time.Second), true
	case n < 500*s:
		return untilTime(time.Unix(int64(n), int64(frac)), now), true
	case n < 30000*s:
		return untilTime(time.Unix(int64(n/1000), int64(n%1000)*1e6+int64(frac/1000)), now), true
	}
	return 0, false
}

// fieldItems appends to dst the members of a field sent on the lines vs:
// each line split at its commas, since a proxy may fold the lines of a
// field into one, comma-joined (RFC 9110 5.3), the comma of an HTTP-date
// ("Tue, 10 Mar 2026 12:00:00 GMT") kept. Members are trimmed; empty ones
// are dropped.
func fieldItems(dst []string, vs []string) []string {
	for _, v := range vs {
		for {
			i := strings.IndexByte(v, ',')
			if i >= 0 && isWord(trimOWS(v[:i])) {
				// A day name: the date goes on to the next comma.
				if j := strings.IndexByte(v[i+1:], ','); j >= 0 {
					i += 1 + j
				} else {
					i = -1
				}
			}
			if i < 0 {
				if item := trimOWS(v); item != "" {
					dst = append(dst, item)
				}
				break
			}
			if item := trimOWS(v[:i]); item != "" {
				dst = append(dst, item)
			}
			v = v[i+1:]
		}
	}
	return dst
}

// isWord reports whether v is a non-empty run of ASCII letters.
func isWord(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return v != ""
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// trimOWS trims the optional whitespace of RFC 9110 (spaces and tabs).
func trimOWS(v string) string {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}
