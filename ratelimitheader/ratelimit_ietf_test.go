package ratelimitheader

import (
	"testing"
	"time"
)

func TestIETFShapes(t *testing.T) {
	const s = time.Second
	ok := func(sig Signal) Signal { return sig } // a signal that may be retried: not Permanent
	runCases(t, nil, []signalCase{
		{name: "field split across lines", status: 429,
			headers: [][2]string{dateNow, {"RateLimit", `"a";r=10;t=30`}, {"RateLimit", `"b";r=0;t=120`}},
			want:    ok(Signal{Throttled: true, Wait: 120 * s, HasWait: true, HasRemaining: true, Reset: 120 * s})},
		{name: "policy split across lines", status: 200,
			headers: [][2]string{{"RateLimit-Policy", `"burst";q=100;w=60`}, {"RateLimit-Policy", `"daily";q=1000;w=86400`}, {"RateLimit", `"daily";r=999;t=3600`}},
			want:    ok(Signal{Remaining: 999, HasRemaining: true, Reset: 3600 * s, Limit: 1000, Period: 86400 * s})},
		{name: "token names", status: 200,
			headers: [][2]string{{"RateLimit-Policy", `default;q=10;w=1`}, {"RateLimit", `default;r=5;t=1`}},
			want:    ok(Signal{Remaining: 5, HasRemaining: true, Reset: s, Limit: 10, Period: s})},
		{name: "partition keys", status: 200,
			headers: [][2]string{{"RateLimit-Policy", `"user";q=10;w=60;pk=:dXNlcjE=:`}, {"RateLimit", `"user";r=5;t=10;pk=:dXNlcjE=:`}},
			want:    ok(Signal{Remaining: 5, HasRemaining: true, Reset: 10 * s, Limit: 10, Period: 60 * s, Bucket: "user;pk=:dXNlcjE=:"})},
		{name: "quota unit other than requests governs the wait only", status: 200,
			headers: [][2]string{{"RateLimit-Policy", `"bytes";q=1000;w=60;qu="content-bytes", "req";q=100;w=60`}, {"RateLimit", `"bytes";r=0;t=20, "req";r=50;t=20`}},
			want:    ok(Signal{Wait: 20 * s, HasWait: true, Remaining: 50, HasRemaining: true, Reset: 20 * s, Limit: 100, Period: 60 * s})},
		{name: "limit without t", status: 200,
			headers: [][2]string{{"RateLimit", `"default";r=0`}},
			want:    ok(Signal{HasRemaining: true})},
		{name: "policy only: the slowest request policy", status: 200,
			headers: [][2]string{{"RateLimit-Policy", `"burst";q=100;w=60,"daily";q=1000;w=86400`}},
			want:    ok(Signal{Limit: 1000, Period: 86400 * s})},
		{name: "policy with a bad w is skipped", status: 200,
			headers: [][2]string{{"RateLimit-Policy", `"a";q=100;w=0, "b";q=5;w="60", "c";q=7;w=10`}},
			want:    ok(Signal{Limit: 7, Period: 10 * s})},
		{name: "unknown policy name", status: 200,
			headers: [][2]string{{"RateLimit-Policy", `"a";q=100;w=60`}, {"RateLimit", `"b";r=3;t=5`}},
			want:    ok(Signal{Remaining: 3, HasRemaining: true, Reset: 5 * s})},
		{name: "inner list and string r ignored, valid member kept", status: 200,
			headers: [][2]string{{"RateLimit", `("x" "y");r=0;t=9, "a";r="0";t=9, "b";r=4;t=9`}},
			want:    ok(Signal{Remaining: 4, HasRemaining: true, Reset: 9 * s})},
		{name: "decimal t ignored with its member", status: 200,
			headers: [][2]string{{"RateLimit", `"a";r=0;t=1.5`}},
			want:    ok(Signal{})},
		{name: "r beyond RFC 9651 integers: field ignored", status: 200,
			headers: [][2]string{{"RateLimit", `"a";r=9999999999999999;t=1`}},
			want:    ok(Signal{})},
		{name: "-07 dictionary with its policy", status: 200,
			headers: [][2]string{{"RateLimit", "limit=100, remaining=50, reset=30"}, {"RateLimit-Policy", "100;w=60"}},
			want:    ok(Signal{Remaining: 50, HasRemaining: true, Reset: 30 * s, Limit: 100, Period: 60 * s})},
		{name: "-07 dictionary with a bad reset", status: 200,
			headers: [][2]string{{"RateLimit", "limit=100, remaining=0, reset=-3"}},
			want:    ok(Signal{})},
		{name: "-06 duplicate remaining: the fewer", status: 200,
			headers: [][2]string{{"RateLimit-Remaining", "5"}, {"RateLimit-Remaining", "3"}, {"RateLimit-Reset", "10"}},
			want:    ok(Signal{Remaining: 3, HasRemaining: true, Reset: 10 * s})},
		{name: "early-draft limit list", status: 200,
			headers: [][2]string{{"RateLimit-Limit", "10, 10;w=1, 1000;w=3600"}, {"RateLimit-Remaining", "9"}},
			want:    ok(Signal{Remaining: 9, HasRemaining: true, Limit: 10, Period: s})},
		{name: "GitLab: epoch reset and ResetTime", status: 429,
			headers: [][2]string{dateNow, {"RateLimit-Limit", "60"}, {"RateLimit-Observed", "67"}, {"RateLimit-Remaining", "0"},
				{"RateLimit-Reset", "1773144060"}, {"RateLimit-ResetTime", "Tue, 10 Mar 2026 12:01:00 GMT"}, {"Retry-After", "60"}},
			want: ok(Signal{Throttled: true, Wait: 60 * s, HasWait: true, RetryAfter: true, HasRemaining: true, Reset: 60 * s, Limit: 60})},
		{name: "GitLab: ResetTime alone", status: 200,
			headers: [][2]string{dateNow, {"RateLimit-Remaining", "0"}, {"RateLimit-ResetTime", "Tue, 10 Mar 2026 12:01:00 GMT"}},
			want:    ok(Signal{Wait: 60 * s, HasWait: true, HasRemaining: true, Reset: 60 * s})},
		{name: "Atlassian Beta-RateLimit", status: 200,
			headers: [][2]string{{"Beta-Ratelimit-Policy", `"tenant-app-quota";q=100100;w=3600`}, {"Beta-Ratelimit", `"tenant-app-quota";r=17842;t=2107`}},
			want:    ok(Signal{Remaining: 17842, HasRemaining: true, Reset: 2107 * s, Limit: 100100, Period: 3600 * s})},
		{name: "lower-case field names", status: 200,
			headers: [][2]string{{"ratelimit", `"default";r=8;t=3`}},
			want:    ok(Signal{Remaining: 8, HasRemaining: true, Reset: 3 * s})},
		{name: "Docker Hub: counts that carry their window", status: 200,
			headers: [][2]string{{"ratelimit-limit", "100;w=21600"}, {"ratelimit-remaining", "76;w=21600"}, {"docker-ratelimit-source", "192.0.2.1"}},
			want:    ok(Signal{Remaining: 76, HasRemaining: true, Limit: 100, Period: 6 * time.Hour})},
		{name: "a window on the remaining count alone", status: 200,
			headers: [][2]string{{"RateLimit-Limit", "100"}, {"RateLimit-Remaining", "0;w=60"}, {"RateLimit-Reset", "20"}},
			want:    ok(Signal{Wait: 20 * s, HasWait: true, HasRemaining: true, Reset: 20 * s, Limit: 100, Period: 60 * s})},
		{name: "a remaining count with a bad parameter is ignored", status: 200,
			headers: [][2]string{{"RateLimit-Remaining", "5;w=0"}, {"RateLimit-Reset", "20"}},
			want:    ok(Signal{})},
		{name: "a remaining count that is no Integer is ignored", status: 200,
			headers: [][2]string{{"RateLimit-Remaining", `"5";w=60`}, {"RateLimit-Limit", "-3;w=60"}},
			want:    ok(Signal{})},
	})
}

// Yelp joins a scope and a window to Limit and Remaining without a hyphen:
// RateLimit-ResourceDailyLimit, RateLimit-ResourceRemaining, each scope a
// window of its own.
func TestJoinedWindows(t *testing.T) {
	const s, day = time.Second, 24 * time.Hour
	midnight := [2]string{"RateLimit-ResetTime", "2026-03-11T00:00:00+00:00"}
	yelp := func(kv ...string) [][2]string {
		h := [][2]string{dateNow, midnight}
		for i := 0; i < len(kv); i += 2 {
			h = append(h, [2]string{kv[i], kv[i+1]})
		}
		return h
	}
	runCases(t, nil, []signalCase{
		{name: "the endpoint's window binds", status: 200,
			headers: yelp("RateLimit-DailyLimit", "500", "RateLimit-Remaining", "499", "RateLimit-ResourceDailyLimit", "100", "RateLimit-ResourceRemaining", "99"),
			want:    Signal{Remaining: 99, HasRemaining: true, Reset: 12 * time.Hour, Limit: 100, Period: day}},
		{name: "the account's window binds", status: 200,
			headers: yelp("RateLimit-DailyLimit", "500", "RateLimit-Remaining", "9", "RateLimit-ResourceDailyLimit", "100", "RateLimit-ResourceRemaining", "99"),
			want:    Signal{Remaining: 9, HasRemaining: true, Reset: 12 * time.Hour, Limit: 500, Period: day}},
		{name: "lower case, a proxy's folded lines", status: 200,
			headers: [][2]string{dateNow, {"ratelimit-resettime", "2026-03-11T00:00:00+00:00"}, {"ratelimit-resourcedailylimit", "100, 100"},
				{"ratelimit-resourceremaining", "40, 30"}, {"ratelimit-remaining", "400"}},
			want: Signal{Remaining: 30, HasRemaining: true, Reset: 12 * time.Hour, Limit: 100, Period: day}},
		{name: "an endpoint's remaining alone", status: 429,
			headers: [][2]string{{"RateLimit-ResourceRemaining", "0"}, {"RateLimit-Reset", "30"}},
			want:    Signal{Throttled: true, Wait: 30 * s, HasWait: true, HasRemaining: true, Reset: 30 * s}},
		{name: "a limit without a window", status: 200,
			headers: [][2]string{{"RateLimit-SearchLimit", "10"}, {"RateLimit-SearchRemaining", "3"}},
			want:    Signal{Remaining: 3, HasRemaining: true, Limit: 10}},
		{name: "malformed counts ignored", status: 200,
			headers: yelp("RateLimit-DailyLimit", "-500", "RateLimit-Remaining", "7", "RateLimit-ResourceDailyLimit", "NaN",
				"RateLimit-ResourceRemaining", "1e3", "RateLimit-OtherRemaining", "", "RateLimit-ThirdRemaining", "-1"),
			want: Signal{Remaining: 7, HasRemaining: true, Reset: 12 * time.Hour, Period: 0}},
		{name: "a huge count saturates", status: 200,
			headers: yelp("RateLimit-DailyLimit", "99999999999999999999999", "RateLimit-Remaining", "99999999999999999999999"),
			want:    Signal{Remaining: 1<<63 - 1, HasRemaining: true, Reset: 12 * time.Hour, Limit: 1<<63 - 1, Period: day}},
		{name: "RateLimit-Limit wins over a joined limit", status: 200,
			headers: [][2]string{{"RateLimit-Limit", "60"}, {"RateLimit-DailyLimit", "500"}, {"RateLimit-Remaining", "59"}},
			want:    Signal{Remaining: 59, HasRemaining: true, Limit: 60}},
		{name: "no more than maxJoined scopes", status: 200,
			headers: [][2]string{{"RateLimit-ARemaining", "9"}, {"RateLimit-BRemaining", "9"}, {"RateLimit-CRemaining", "9"},
				{"RateLimit-DRemaining", "9"}, {"RateLimit-ERemaining", "9"}, {"RateLimit-FRemaining", "9"}},
			want: Signal{Remaining: 9, HasRemaining: true}},
		{name: "names that join nothing are not read", status: 200,
			headers: [][2]string{{"RateLimit-Limit", "5"}, {"RateLimit-Remaining-Day", "1"}, {"RateLimit-Observed", "3"}},
			want:    Signal{}},
	})
}
