package ratelimitheader

import (
	"testing"
	"time"
)

// Azure's resource providers list their throttling policies, each
// <provider>/<policy>;<count>, the window at the end of the name.
func TestPolicyCounts(t *testing.T) {
	const m = time.Minute
	const compute = "X-Ms-Ratelimit-Remaining-Resource"
	runCases(t, nil, []signalCase{
		{name: "one line, two policies: the fewest left", status: 200,
			headers: [][2]string{dateNow, {compute, "Microsoft.Compute/HighCostGet3Min;107,Microsoft.Compute/HighCostGet30Min;587"}},
			want:    Signal{Remaining: 107, HasRemaining: true, Period: 3 * m}},
		{name: "a line per policy, in any order", status: 200,
			headers: [][2]string{{compute, "Microsoft.Compute/GetVMScaleSet30Min;12"}, {compute, "Microsoft.Compute/GetVMScaleSet3Min;197"}},
			want:    Signal{Remaining: 12, HasRemaining: true, Period: 30 * m}},
		{name: "a space after the semicolon, a policy without a window", status: 200,
			headers: [][2]string{{compute, "Microsoft.Compute/HighCostGet; 159"}, {compute, "Microsoft.Compute/VmssQueuedVMOperations;4720"}},
			want:    Signal{Remaining: 159, HasRemaining: true}},
		{name: "spent, with the 429's Retry-After", status: 429,
			headers: [][2]string{dateNow, {"Retry-After", "17"}, {compute, "Microsoft.Compute/DeleteVMScaleSet3Min;0,Microsoft.Compute/DeleteVMScaleSet30Min;587"}},
			want:    Signal{Throttled: true, Wait: 17 * time.Second, HasWait: true, RetryAfter: true, HasRemaining: true, Period: 3 * m}},
		{name: "spent without a Retry-After: no wait is named", status: 429,
			headers: [][2]string{{compute, "Microsoft.Compute/HighCostGet3Min;0"}},
			want:    Signal{Throttled: true, HasRemaining: true, Period: 3 * m}},
		{name: "next to the subscription's count", status: 200,
			headers: [][2]string{{"x-ms-ratelimit-remaining-subscription-reads", "11999"}, {"x-ms-ratelimit-remaining-resource", "Microsoft.Compute/GetVMScaleSet3Min;197,Microsoft.Compute/GetVMScaleSet30Min;1297"}},
			want:    Signal{Remaining: 197, HasRemaining: true, Period: 3 * m}},
		{name: "malformed counts ignored", status: 200,
			headers: [][2]string{{compute, "Microsoft.Compute/A3Min;-1, Microsoft.Compute/B3Min;NaN, Microsoft.Compute/C3Min;1e3, ;5, 7;8, Microsoft.Compute/D30Min;99999999999999999999999"}},
			want:    Signal{Remaining: 1<<63 - 1, HasRemaining: true, Period: 30 * m}},
		{name: "an early draft's policy is not a named count", status: 200,
			headers: [][2]string{{"X-Ratelimit-Remaining", "5;w=60"}},
			want:    Signal{}},
		{name: "a plain count next to a named one", status: 200,
			headers: [][2]string{{"X-Ratelimit-Remaining", "40, Burst10Sec;3"}},
			want:    Signal{Remaining: 3, HasRemaining: true, Period: 10 * time.Second}},
	})
	for name, want := range map[string]time.Duration{
		"Microsoft.Compute/HighCostGet3Min": 3 * m, "Microsoft.Compute/PutVM30Min": 30 * m, "Burst10Sec": 10 * time.Second,
		"Daily1Day": 24 * time.Hour, "VmssQueuedVMOperations": 0, "HighCostGet2": 0, "Gen2d": 0, "3Min/": 0, "": 0, "/": 0,
		"Min": 0, "99999999999Min": 0, "1001Hour": 0, "Get0Min": 0, "Foo1000Year": 0, "Foo300Year": 0, "Foo13Month": 0,
		"Foo12Month": 360 * 24 * time.Hour,
	} {
		if got := policyWindow(name); got != want {
			t.Errorf("policyWindow(%q) = %v, want %v", name, got, want)
		}
	}
}

// Etsy and Xero name the window in the field's name, without a RateLimit
// prefix.
func TestWindowedNames(t *testing.T) {
	const s, m, day = time.Second, time.Minute, 24 * time.Hour
	etsy := func(perSecond, thisSecond, perDay, today string) [][2]string {
		return [][2]string{dateNow, {"X-Limit-Per-Second", perSecond}, {"X-Remaining-This-Second", thisSecond},
			{"X-Limit-Per-Day", perDay}, {"X-Remaining-Today", today}}
	}
	runCases(t, nil, []signalCase{
		{name: "Etsy: the second's 3 bind", status: 200, headers: etsy("10", "3", "10000", "9000"),
			want: Signal{Remaining: 3, HasRemaining: true, Limit: 10, Period: s}},
		{name: "Etsy: the day spent, no reset, not a second's window", status: 429, headers: etsy("10", "9", "10000", "0"),
			want: Signal{Throttled: true, HasRemaining: true, Limit: 10000, Period: day}},
		{name: "Etsy: lower case, folded lines", status: 200,
			headers: [][2]string{{"x-limit-per-second", "10"}, {"x-remaining-this-second", "4, 2"}, {"x-limit-per-day", "10000"}, {"x-remaining-today", "500"}},
			want:    Signal{Remaining: 2, HasRemaining: true, Limit: 10, Period: s}},
		{name: "Etsy: malformed counts ignored", status: 200, headers: etsy("-10", "NaN", "1e4", "99999999999999999999999"),
			want: Signal{Remaining: 1<<63 - 1, HasRemaining: true, Period: day}},
		{name: "Xero 200: the tenant's minute binds", status: 200,
			headers: [][2]string{{"X-DayLimit-Remaining", "4000"}, {"X-MinLimit-Remaining", "59"}, {"X-AppMinLimit-Remaining", "9000"}},
			want:    Signal{Remaining: 59, HasRemaining: true, Period: m}},
		{name: "Xero 429 minute", status: 429,
			headers: [][2]string{{"Retry-After", "20"}, {"X-DayLimit-Remaining", "4000"}, {"X-MinLimit-Remaining", "0"},
				{"X-AppMinLimit-Remaining", "9000"}, {"X-Rate-Limit-Problem", "minute"}},
			want: Signal{Throttled: true, Wait: 20 * s, HasWait: true, RetryAfter: true, HasRemaining: true, Period: m}},
		{name: "Xero 429 appminute: every tenant waits", status: 429,
			headers: [][2]string{{"Retry-After", "7"}, {"X-DayLimit-Remaining", "4000"}, {"X-MinLimit-Remaining", "30"},
				{"X-AppMinLimit-Remaining", "0"}, {"X-Rate-Limit-Problem", "appminute"}},
			want: Signal{Throttled: true, Scope: ScopeGlobal, Wait: 7 * s, HasWait: true, RetryAfter: true, HasRemaining: true, Period: m}},
		{name: "Xero 429 day: over the cap", status: 429,
			headers: [][2]string{{"Retry-After", "43000"}, {"X-DayLimit-Remaining", "0"}, {"X-MinLimit-Remaining", "59"}, {"X-Rate-Limit-Problem", "day"}},
			want:    Signal{Throttled: true, Wait: 43000 * s, HasWait: true, RetryAfter: true, OverMaxServerWait: true, HasRemaining: true, Period: day}},
		{name: "Xero: the problem names the spent window, whatever its count said", status: 429,
			headers: [][2]string{{"X-MinLimit-Remaining", "2"}, {"X-Rate-Limit-Problem", "Minute"}},
			want:    Signal{Throttled: true, HasRemaining: true, Period: m}},
		{name: "a problem on a 200 says nothing", status: 200,
			headers: [][2]string{{"X-MinLimit-Remaining", "2"}, {"X-Rate-Limit-Problem", "appminute"}},
			want:    Signal{Remaining: 2, HasRemaining: true, Period: m}},
		{name: "an unknown problem says nothing", status: 429,
			headers: [][2]string{{"X-Rate-Limit-Problem", "concurrent"}},
			want:    Signal{Throttled: true}},
		{name: "names that state no window are not read", status: 200,
			headers: [][2]string{{"X-Adslimit-Remaining", "1"}, {"X-Limit-Foo", "2"}, {"X-Remaining-Requests", "3"}, {"X-Limit-This-Second", "4"},
				{"X-Remaining-Per-Second", "5"}, {"X-Daylimit-Remaining-Tokens", "6"}, {"X-Limit-Per-Appsecond", "7"}},
			want: Signal{}},
	})
	for k, want := range map[string]struct {
		kind   string
		f      xField
		period time.Duration
	}{
		"X-Limit-Per-Second": {"Second", xLimit, s}, "X-Remaining-This-Second": {"Second", xRemaining, s},
		"X-Remaining-Today": {"Day", xRemaining, day}, "X-Limit-Per-Minute": {"Minute", xLimit, m},
		"X-Daylimit-Remaining": {"Day", xRemaining, day}, "X-Appminlimit-Remaining": {"Appmin", xRemaining, m},
		"X-Hourlimit-Limit": {"Hour", xLimit, time.Hour}, "X-Ratelimit-Remaining": {}, "X-Limit-": {}, "X-Remaining-": {},
		"X-Limit-Per-": {}, "X-Daylimit-": {}, "X-Daylimit": {}, "X-limit-Remaining": {}, "X-Sslimit-Remaining": {},
	} {
		kind, f, period := windowedName(k)
		if kind != want.kind || f != want.f || period != want.period {
			t.Errorf("windowedName(%q) = %q, %v, %v; want %+v", k, kind, f, period, want)
		}
	}
}

// ImageKit's X-RateLimit-Interval and X-RateLimit-Reset count
// milliseconds; a bare interval is read so only where nothing else fits.
func TestMillisecondWindow(t *testing.T) {
	const ms = time.Millisecond
	ik := func(status int, kv ...string) signalCase {
		c := signalCase{status: status, headers: [][2]string{dateNow}}
		for i := 0; i < len(kv); i += 2 {
			c.headers = append(c.headers, [2]string{kv[i], kv[i+1]})
		}
		return c
	}
	cases := []struct {
		c    signalCase
		name string
		want Signal
	}{
		{ik(200, "X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1500", "X-RateLimit-Interval", "60000"),
			"1500 with a 60000 interval: 1.5 s of a minute",
			Signal{Wait: 1500 * ms, HasWait: true, HasRemaining: true, Reset: 1500 * ms, Limit: 100, Period: time.Minute}},
		{ik(429, "X-RateLimit-Limit", "100", "X-RateLimit-Reset", "1500", "X-RateLimit-Interval", "60000"),
			"ImageKit's 429 states no remaining: the window it met is spent",
			Signal{Throttled: true, Wait: 1500 * ms, HasWait: true, HasRemaining: true, Reset: 1500 * ms, Limit: 100, Period: time.Minute}},
		{ik(200, "X-RateLimit-Limit", "100", "X-RateLimit-Reset", "1500", "X-RateLimit-Interval", "60000"),
			"no remaining on a 200: nothing learned", Signal{}},
		{ik(200, "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "30", "X-RateLimit-Interval", "60000"),
			"a reset that fits the interval in seconds: ambiguous, left as it was",
			Signal{Remaining: 5, HasRemaining: true, Reset: 30 * time.Second}},
		{ik(200, "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "1500", "X-RateLimit-Interval", "18000"),
			"18000: 18 s or 5 h, ambiguous",
			Signal{Remaining: 5, HasRemaining: true, Reset: 1500 * time.Second}},
		{ik(200, "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "70000", "X-RateLimit-Interval", "60000"),
			"a reset beyond the interval in milliseconds too",
			Signal{Remaining: 5, HasRemaining: true, Reset: 70000 * time.Second}},
		{ik(200, "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "1500.5", "X-RateLimit-Interval", "60000"),
			"a fraction: not ImageKit's", Signal{Remaining: 5, HasRemaining: true, Reset: 1500500 * ms}},
		{ik(200, "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "1500", "X-RateLimit-Interval", "60000, 1000"),
			"two intervals", Signal{Remaining: 5, HasRemaining: true, Reset: 1500 * time.Second}},
		{ik(200, "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "1500", "X-RateLimit-Interval", "-60000"),
			"a negative interval", Signal{Remaining: 5, HasRemaining: true, Reset: 1500 * time.Second}},
		{ik(200, "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "1500", "X-RateLimit-Interval", "NaN"),
			"NaN", Signal{Remaining: 5, HasRemaining: true, Reset: 1500 * time.Second}},
		{ik(200, "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "1500", "X-RateLimit-Interval", "99999999999999999999999000"),
			"a huge interval", Signal{Remaining: 5, HasRemaining: true, Reset: 1500 * time.Second}},
		{ik(200, "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "99999999999999999999999", "X-RateLimit-Interval", "60000"),
			"a huge reset", Signal{Remaining: 5, HasRemaining: true}},
		{ik(200, "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "45", "X-RateLimit-Interval", "60s"),
			"an interval with its unit: seconds", Signal{Remaining: 5, HasRemaining: true, Reset: 45 * time.Second, Period: time.Minute}},
		{ik(200, "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "1500", "X-RateLimit-Interval", "60s"),
			"a reset beyond its window in seconds, within it in ms", Signal{Remaining: 5, HasRemaining: true, Reset: 1500 * ms, Period: time.Minute}},
		{ik(429, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1500", "X-RateLimit-Interval", "60s"),
			"throttled: a reset beyond its window may be a block", Signal{Throttled: true, Wait: 1500 * time.Second, HasWait: true, HasRemaining: true, Reset: 1500 * time.Second, Period: time.Minute}},
		{ik(429, "Retry-After", "600", "X-Rate-Limit-Limit", "10000", "X-Rate-Limit-Remaining", "0", "X-Rate-Limit-Reset", "600000"),
			"a reset in ms that a stated delay shows", Signal{Throttled: true, Wait: 600 * time.Second, HasWait: true, RetryAfter: true, HasRemaining: true, Reset: 600 * time.Second, Limit: 10000}},
		{ik(429, "Retry-After", "600", "X-Rate-Limit-Remaining", "0", "X-Rate-Limit-Reset", "3600"),
			"a reset in seconds beyond a stated delay stays", Signal{Throttled: true, Wait: 600 * time.Second, HasWait: true, RetryAfter: true, HasRemaining: true, Reset: time.Hour}},
		{ik(429, "Retry-After", "5", "X-Rate-Limit-Remaining", "0", "X-Rate-Limit-Reset", "600000"),
			"a reset that agrees with no stated delay stays", Signal{Throttled: true, Wait: 5 * time.Second, HasWait: true, RetryAfter: true, HasRemaining: true, Reset: 600000 * time.Second}},
		{ik(200, "X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "10", "X-RateLimit-Window", "60", "X-RateLimit-Reset", "45000"),
			"a window in seconds shows a reset in ms", Signal{HasRemaining: true, Remaining: 10, Limit: 60, Period: time.Minute, Reset: 45 * time.Second}},
		{ik(200, "X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "10", "X-RateLimit-Window", "60", "X-RateLimit-Reset", "45"),
			"a reset within its window in seconds stays", Signal{HasRemaining: true, Remaining: 10, Limit: 60, Period: time.Minute, Reset: 45 * time.Second}},
		{ik(200, "X-RateLimit-Limit-Daily", "1000", "X-RateLimit-Daily-Remaining", "500", "X-RateLimit-Daily-Reset", "89000"),
			"a local day of 25 hours stays seconds", Signal{HasRemaining: true, Remaining: 500, Limit: 1000, Period: 24 * time.Hour, Reset: 89000 * time.Second}},
		{ik(200, "X-RateLimit-Limit-Daily", "1000", "X-RateLimit-Daily-Remaining", "500", "X-RateLimit-Daily-Reset", "43200000"),
			"a day's reset in milliseconds", Signal{HasRemaining: true, Remaining: 500, Limit: 1000, Period: 24 * time.Hour, Reset: 12 * time.Hour}},
		{ik(200, "X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "10", "X-RateLimit-Window", "60", "X-RateLimit-Reset", "61.5"),
			"a fraction is never ms", Signal{HasRemaining: true, Remaining: 10, Limit: 60, Period: time.Minute, Reset: 61500 * ms}},
		{ik(200, "X-Rate-Limit-Limit", "10000", "X-Rate-Limit-Remaining", "9000", "X-Rate-Limit-Reset", "1800000"),
			"without a window or a delay, a long reset stays seconds", Signal{HasRemaining: true, Remaining: 9000, Limit: 10000, Reset: 1800000 * time.Second}},
		{ik(200, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset-Ms", "1500", "X-RateLimit-Interval", "60000"),
			"Reset-Ms says its unit itself", Signal{Wait: 1500 * ms, HasWait: true, HasRemaining: true, Reset: 1500 * ms}},
	}
	var cs []signalCase
	for _, c := range cases {
		c.c.name, c.c.want = c.name, c.want
		cs = append(cs, c.c)
	}
	runCases(t, nil, cs)
}

// Zendesk's per-endpoint fields state a window as key=value members.
func TestKeyedWindow(t *testing.T) {
	const s = time.Second
	zd := "Zendesk-Ratelimit-Tickets-Index"
	runCases(t, nil, []signalCase{
		{name: "per-endpoint binds below the account's", status: 200,
			headers: [][2]string{{"X-Rate-Limit", "700"}, {"X-Rate-Limit-Remaining", "650"}, {zd, "total=100; remaining=99; resets=10"}},
			want:    Signal{Remaining: 99, HasRemaining: true, Reset: 10 * s, Limit: 100}},
		{name: "spent: its reset is the wait", status: 200,
			headers: [][2]string{{zd, "total=100; remaining=0; resets=10"}},
			want:    Signal{Wait: 10 * s, HasWait: true, HasRemaining: true, Reset: 10 * s, Limit: 100}},
		{name: "keys in any case, limit and reset, commas", status: 200,
			headers: [][2]string{{"zendesk-ratelimit-search-export", "Limit=100, Remaining=0, Reset=7"}},
			want:    Signal{Wait: 7 * s, HasWait: true, HasRemaining: true, Reset: 7 * s, Limit: 100}},
		{name: "two endpoints: the fewest left", status: 200,
			headers: [][2]string{{zd, "total=100; remaining=40; resets=10"}, {"Zendesk-Ratelimit-Users-Index", "total=50; remaining=3; resets=20"}},
			want:    Signal{Remaining: 3, HasRemaining: true, Reset: 20 * s, Limit: 50}},
		{name: "folded twice: the most conservative", status: 200,
			headers: [][2]string{{zd, "total=100; remaining=9; resets=10, total=100; remaining=8; resets=12"}},
			want:    Signal{Remaining: 8, HasRemaining: true, Reset: 12 * s, Limit: 100}},
		{name: "malformed values ignored", status: 200,
			headers: [][2]string{{zd, "total=-1; remaining=NaN; resets=1e3"}, {"Zendesk-Ratelimit-Other", "remaining=5; resets=-10; total=; =4; ;;"}},
			want:    Signal{Remaining: 5, HasRemaining: true}},
		{name: "a reset beyond any window ignored", status: 200,
			headers: [][2]string{{zd, "remaining=0; resets=99999999999999999999999"}, {"Zendesk-Ratelimit-Other", "remaining=1; resets=31622401"}},
			want:    Signal{HasRemaining: true}},
	})
}

// Binance bans an address that ignores its 429s with a 418 whose
// Retry-After is the seconds until the ban ends: throttled, every key of the
// host waits. A 418 that states no usable delay says nothing.
func TestTeapotBan(t *testing.T) {
	const s = time.Second
	ban := func(kv ...string) [][2]string {
		h := [][2]string{dateNow}
		for i := 0; i < len(kv); i += 2 {
			h = append(h, [2]string{kv[i], kv[i+1]})
		}
		return h
	}
	runCases(t, nil, []signalCase{
		{name: "Retry-After", status: 418, headers: ban("Retry-After", "120"),
			want: Signal{Throttled: true, Scope: ScopeGlobal, Wait: 120 * s, HasWait: true, RetryAfter: true}},
		{name: "an HTTP-date", status: 418, headers: ban("Retry-After", "Tue, 10 Mar 2026 12:02:00 GMT"),
			want: Signal{Throttled: true, Scope: ScopeGlobal, Wait: 120 * s, HasWait: true, RetryAfter: true}},
		{name: "a stated delay of the X- family", status: 418, headers: ban("X-RateLimit-Retry-After", "7"),
			want: Signal{Throttled: true, Scope: ScopeGlobal, Wait: 7 * s, HasWait: true, RetryAfter: true}},
		{name: "days: over the cap", status: 418, headers: ban("Retry-After", "259200"),
			want: Signal{Throttled: true, Scope: ScopeGlobal, Wait: 259200 * s, HasWait: true, RetryAfter: true, OverMaxServerWait: true}},
		{name: "huge: saturated, over the cap", status: 418, headers: ban("Retry-After", "99999999999999999999999"),
			want: Signal{Throttled: true, Scope: ScopeGlobal, Wait: maxDuration, HasWait: true, RetryAfter: true, OverMaxServerWait: true}},
		{name: "negative", status: 418, headers: ban("Retry-After", "-120"), want: Signal{}},
		{name: "NaN", status: 418, headers: ban("Retry-After", "NaN"), want: Signal{}},
		{name: "an exponent", status: 418, headers: ban("Retry-After", "1e3"), want: Signal{}},
		{name: "empty", status: 418, headers: ban("Retry-After", ""), want: Signal{}},
		{name: "no delay", status: 418, headers: ban(), want: Signal{}},
		{name: "a quota without a delay is read, not throttled", status: 418,
			headers: ban("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "30"),
			want:    Signal{Wait: 30 * s, HasWait: true, HasRemaining: true, Reset: 30 * s}},
		{name: "a 200 with Retry-After says nothing", status: 200, headers: ban("Retry-After", "120"), want: Signal{}},
	})
}
