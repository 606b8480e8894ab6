package ratelimitheader

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRetryAfterShapes(t *testing.T) {
	thr := func(d time.Duration) Signal {
		return Signal{Throttled: true, Wait: d, HasWait: true, RetryAfter: true}
	}
	noWait := Signal{Throttled: true}
	runCases(t, nil, []signalCase{
		{name: "RFC 850 date", status: 429, headers: [][2]string{dateNow, {"Retry-After", "Tuesday, 10-Mar-26 12:01:00 GMT"}}, want: thr(time.Minute)},
		{name: "RFC 850 in another zone", status: 429, headers: [][2]string{dateNow, {"Retry-After", "Tuesday, 10-Mar-26 12:01:00 PST"}}, want: noWait},
		{name: "asctime with one-digit day", status: 429, headers: [][2]string{{"Date", "Tue, 03 Mar 2026 12:00:00 GMT"}, {"Retry-After", "Tue Mar  3 12:00:09 2026"}}, want: thr(9 * time.Second)},
		{name: "IMF-fixdate without Date uses local now", status: 503, headers: [][2]string{{"Retry-After", "Tue, 10 Mar 2026 12:00:30 GMT"}}, want: thr(30 * time.Second)},
		{name: "invalid Date falls back to local now", status: 503, headers: [][2]string{{"Date", "yesterday"}, {"Retry-After", "Tue, 10 Mar 2026 12:00:30 GMT"}}, want: thr(30 * time.Second)},
		{name: "plus sign", status: 429, headers: [][2]string{{"Retry-After", "+5"}}, want: noWait},
		{name: "underscore", status: 429, headers: [][2]string{{"Retry-After", "1_000"}}, want: noWait},
		{name: "leading dot", status: 429, headers: [][2]string{{"Retry-After", ".5"}}, want: noWait},
		{name: "trailing dot", status: 429, headers: [][2]string{{"Retry-After", "5."}}, want: noWait},
		{name: "hex", status: 429, headers: [][2]string{{"Retry-After", "0x10"}}, want: noWait},
		{name: "infinity", status: 429, headers: [][2]string{{"Retry-After", "Inf"}}, want: noWait},
		{name: "two values joined by a proxy: the larger", status: 429, headers: [][2]string{{"Retry-After", "10, 20"}}, want: thr(20 * time.Second)},
		{name: "whitespace trimmed", status: 429, headers: [][2]string{{"Retry-After", " \t30 "}}, want: thr(30 * time.Second)},
		{name: "zero", status: 429, headers: [][2]string{{"Retry-After", "0"}}, want: thr(0)},
		{name: "valid line beats garbage line", status: 429, headers: [][2]string{{"Retry-After", "soon"}, {"Retry-After", "4"}}, want: thr(4 * time.Second)},
		{name: "retry-after-ms alone", status: 429, headers: [][2]string{{"Retry-After-Ms", "1500"}}, want: thr(1500 * time.Millisecond)},
		{name: "ms far below Retry-After: keep the longer", status: 429, headers: [][2]string{{"Retry-After", "10"}, {"X-Ms-Retry-After-Ms", "2000"}}, want: thr(10 * time.Second)},
		{name: "ms above Retry-After: take it", status: 429, headers: [][2]string{{"Retry-After", "1"}, {"Retry-After-Ms", "5000"}}, want: thr(5 * time.Second)},
		{name: "bad ms ignored", status: 429, headers: [][2]string{{"Retry-After", "3"}, {"Retry-After-Ms", "-1"}}, want: thr(3 * time.Second)},
		{name: "non-canonical key", status: 429, headers: [][2]string{{"retry-after", "7"}}, want: thr(7 * time.Second)},
		{name: "Beta-Retry-After alone (Atlassian)", status: 429, headers: [][2]string{{"Beta-Retry-After", "120"}}, want: thr(2 * time.Minute)},
		{name: "Beta-Retry-After beside Retry-After: Retry-After governs", status: 429, headers: [][2]string{{"Retry-After", "5"}, {"beta-retry-after", "2788"}}, want: thr(5 * time.Second)},
		{name: "Beta-Retry-After beside a garbage Retry-After", status: 429, headers: [][2]string{{"Retry-After", "soon"}, {"Beta-Retry-After", "30"}}, want: thr(30 * time.Second)},
		{name: "Beta-Retry-After garbage ignored", status: 429, headers: [][2]string{{"Beta-Retry-After", "soon"}}, want: noWait},
		{name: "200 ignores Beta-Retry-After", status: 200, headers: [][2]string{{"Beta-Retry-After", "7"}}, want: Signal{}},
		{name: "200 ignores Retry-After", status: 200, headers: [][2]string{{"Retry-After", "7"}}, want: Signal{}},
		{name: "202 polling hint is not a rate limit", status: 202, headers: [][2]string{{"Retry-After", "10"}}, want: Signal{}},
		{name: "500 is not a rate limit", status: 500, headers: [][2]string{{"Retry-After", "10"}}, want: Signal{}},
		{name: "403 with Retry-After is a limit", status: 403, headers: [][2]string{{"Retry-After", "10"}}, want: thr(10 * time.Second)},
		{name: "bare 503 is an overload", status: 503, want: noWait},
		{name: "cached 429 says nothing more", status: 429, headers: [][2]string{{"Age", "5"}, {"Retry-After", "10"}}, want: noWait},
		{name: "RFC 3339 measured against Date (Zoom)", status: 429, headers: [][2]string{dateNow, {"Retry-After", "2026-03-10T12:05:00Z"}}, want: thr(5 * time.Minute)},
		{name: "RFC 3339 with an offset and a fraction", status: 429, headers: [][2]string{dateNow, {"Retry-After", "2026-03-10T07:00:01.5-05:00"}}, want: thr(1500 * time.Millisecond)},
		{name: "RFC 3339 in the past: zero", status: 429, headers: [][2]string{dateNow, {"Retry-After", "2026-03-10T11:00:00Z"}}, want: thr(0)},
		{name: "RFC 3339 over the cap", status: 429, headers: [][2]string{dateNow, {"Retry-After", "2026-03-11T00:00:00Z"}},
			want: Signal{Throttled: true, Wait: 12 * time.Hour, HasWait: true, RetryAfter: true, OverMaxServerWait: true}},
		{name: "RFC 3339 far ahead saturates, never overflows", status: 429, headers: [][2]string{dateNow, {"Retry-After", "9999-12-31T23:59:59Z"}},
			want: Signal{Throttled: true, Wait: maxDuration, HasWait: true, RetryAfter: true, OverMaxServerWait: true}},
		{name: "RFC 3339 without its zone", status: 429, headers: [][2]string{dateNow, {"Retry-After", "2026-03-10T12:05:00"}}, want: noWait},
		{name: "a date alone", status: 429, headers: [][2]string{dateNow, {"Retry-After", "2026-03-11"}}, want: noWait},
		{name: "RFC 3339 out of range", status: 429, headers: [][2]string{dateNow, {"Retry-After", "2026-13-40T25:00:00Z"}}, want: noWait},
		{name: "Age 0 is fresh", status: 429, headers: [][2]string{{"Age", "0"}, {"Retry-After", "10"}}, want: thr(10 * time.Second)},
	})
}

func TestRetryAfterMaxWait(t *testing.T) {
	runCases(t, &Parser{MaxServerWait: time.Minute}, []signalCase{
		{name: "over a custom cap", status: 429, headers: [][2]string{{"Retry-After", "120"}},
			want: Signal{Throttled: true, Wait: 2 * time.Minute, HasWait: true, RetryAfter: true, OverMaxServerWait: true}},
		{name: "at the cap", status: 429, headers: [][2]string{{"Retry-After", "60"}},
			want: Signal{Throttled: true, Wait: time.Minute, HasWait: true, RetryAfter: true}},
	})
}

func TestServerNowBeatsDate(t *testing.T) {
	h := http.Header{"Date": {"Tue, 10 Mar 2026 12:00:00 GMT"}, "Retry-After": {"Tue, 10 Mar 2026 12:00:05 GMT"}}
	in := &Input{Status: 429, Header: h, Now: caseNow.Add(time.Hour), ServerNow: caseNow.Add(600 * time.Millisecond)}
	s := Parse(in)
	assert.Equal(t, 4400*time.Millisecond, s.Wait)
	assert.Equal(t, caseNow.Add(600*time.Millisecond), in.ServerTime())
}

func TestParseNumber(t *testing.T) {
	for _, c := range []struct {
		in    string
		whole uint64
		frac  uint32
		ok    bool
	}{
		{"0", 0, 0, true}, {"120", 120, 0, true}, {"2.0", 2, 0, true}, {"1.25", 1, 250_000_000, true},
		{"0.1234567891", 0, 123_456_789, true}, {"99999999999999999999999", 1<<64 - 1, 0, true},
		{"", 0, 0, false}, {"-1", 0, 0, false}, {"1e3", 0, 0, false}, {"NaN", 0, 0, false}, {"1.", 0, 0, false},
		{".1", 0, 0, false}, {"1..2", 0, 0, false}, {"1 2", 0, 0, false}, {"١", 0, 0, false},
	} {
		w, f, ok := parseNumber(c.in)
		assert.Equal(t, c.ok, ok, c.in)
		if c.ok {
			assert.Equal(t, c.whole, w, c.in)
			assert.Equal(t, c.frac, f, c.in)
		}
	}
	assert.Equal(t, maxDuration, toDuration(1<<64-1, 0, time.Second))
	assert.Equal(t, maxDuration, toDuration(uint64(maxDuration/time.Second), 999_999_999, time.Second))
	assert.Equal(t, 1500*time.Microsecond, toDuration(1, 500_000_000, time.Millisecond))
}

func TestParseReset(t *testing.T) {
	in := &Input{Header: http.Header{"Date": {"Tue, 10 Mar 2026 12:00:00 GMT"}}, Now: caseNow.Add(-time.Hour)}
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"42", 42 * time.Second, true},
		{"1.5", 1500 * time.Millisecond, true},
		{"1773144060", time.Minute, true},                // epoch seconds, against Date
		{"1773144000.750", 750 * time.Millisecond, true}, // epoch with a fraction
		{"1773144030000", 30 * time.Second, true},        // epoch milliseconds
		{"1773143000", 0, true},                          // epoch in the past
		{"2026-03-10T12:00:30Z", 30 * time.Second, true}, // RFC 3339
		{"2026-03-10T13:00:30+01:00", 30 * time.Second, true},
		{"Tue, 10 Mar 2026 12:01:00 GMT", time.Minute, true}, // HTTP-date
		{"1773144030000000", 0, false},                       // microseconds: nonsense
		{"-5", 0, false}, {"soon", 0, false}, {"", 0, false},
	} {
		got, ok := parseReset(c.in, newInput(in))
		assert.Equal(t, c.ok, ok, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
}

func TestParseResetWithoutZone(t *testing.T) {
	date := http.Header{"Date": {"Tue, 10 Mar 2026 12:00:00 GMT"}}
	for _, c := range []struct {
		name string
		in   string
		hdr  http.Header
		srv  time.Time // Input.ServerNow, when set
		want time.Duration
		ok   bool
	}{
		{"T, seconds", "2026-03-10T12:01:00", date, time.Time{}, time.Minute, true},
		{"space, seconds", "2026-03-10 12:01:00", date, time.Time{}, time.Minute, true},
		{"fraction", "2026-03-10T12:00:01.5", date, time.Time{}, 1500 * time.Millisecond, true},
		{"no seconds", "2026-03-10T12:30", date, time.Time{}, 30 * time.Minute, true},
		{"space, no seconds", "2026-03-10 12:30", date, time.Time{}, 30 * time.Minute, true},
		{"just past: zero", "2026-03-10T11:59:30", date, time.Time{}, 0, true},
		{"last minute of the horizon", "2026-03-10T12:58:59", date, time.Time{}, 58*time.Minute + 59*time.Second, true},
		{"at the horizon: could be UTC+1's reset just past", "2026-03-10T12:59:00", date, time.Time{}, 0, false},
		{"an hour ahead: UTC+1's reset now", "2026-03-10T13:00:00", date, time.Time{}, 0, false},
		{"a day ahead: ignored", "2026-03-11T00:00:00", date, time.Time{}, 0, false},
		{"past the slack: UTC-5's reset, or stale", "2026-03-10T07:01:00", date, time.Time{}, 0, false},
		// The local clock here is an hour slow; without a Date it is set
		// right, so that only the missing server clock rejects these.
		{"no Date: the local clock is no server clock", "2026-03-10T12:01:00", http.Header{}, time.Time{}, 0, false},
		{"broken Date", "2026-03-10T12:01:00", http.Header{"Date": {"yesterday"}}, time.Time{}, 0, false},
		{"ServerNow stands for Date", "2026-03-10T12:01:00", http.Header{}, caseNow.Add(30 * time.Second), 30 * time.Second, true},
		{"year 9999", "9999-12-31T23:59:59", date, time.Time{}, 0, false},
		{"year 0000", "0000-01-01 00:00", date, time.Time{}, 0, false},
		{"bad month", "2026-13-10T12:01:00", date, time.Time{}, 0, false},
		{"hour 24", "2026-03-10T24:00:00", date, time.Time{}, 0, false},
		{"trailing junk", "2026-03-10T12:01:00 local", date, time.Time{}, 0, false},
		{"date only", "2026-03-10", date, time.Time{}, 0, false},
		// With a zone, the same times are instants, read however far off.
		{"Z: an hour ahead", "2026-03-10T13:00:00Z", date, time.Time{}, time.Hour, true},
		{"Ruby's Time#to_s (Gusto)", "2026-03-10 05:00:30 -0700", date, time.Time{}, 30 * time.Second, true},
		{"Ruby's Time#to_s with a fraction", "2026-03-10 13:00:30.25 +0100", date, time.Time{}, 30250 * time.Millisecond, true},
	} {
		in := &Input{Header: c.hdr, Now: caseNow.Add(-time.Hour), ServerNow: c.srv}
		if _, ok := dateOf(c.hdr, caseNow); !ok {
			in.Now = caseNow
		}
		got, ok := parseReset(c.in, newInput(in))
		assert.Equal(t, c.ok, ok, c.name)
		assert.Equal(t, c.want, got, c.name)
	}
}
