package fakeserver

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A fixed window counts on the server's own clock: 1.5 s skew puts the
// boundaries of 2 s windows at 0.5 s past the client's odd seconds.
func TestFixedWindowsFollowTheSkewedClock(t *testing.T) {
	s := runExchanges(t, Config{Algorithm: FixedWindow, Limit: 1, Window: 2 * time.Second, ClockSkew: 1500 * time.Millisecond,
		Dialect: IETF06{EpochReset: true, NoRetryAfter: true, NoLimit: true}},
		0, []exchange{
			// 12:00:01.5 on the server: its window [12:00:00, 12:00:02) ends in 0.5 s.
			{0, 200, h("RateLimit-Remaining", "0", "RateLimit-Reset", "1773144002", "RateLimit-Limit", ""), ""},
			{400 * time.Millisecond, 429, h("Retry-After", "", "RateLimit-Reset", "1773144002"), "too many"},
			{100 * time.Millisecond, 200, h("RateLimit-Reset", "1773144004"), ""},
		})
	assert.Equal(t, int64(0), s.Stats().Early)
}

func TestStatedLimitIsNotTheRealOne(t *testing.T) {
	runExchanges(t, Config{Limit: 10, Burst: 2, StatedLimit: 600, StatedWindow: time.Minute, Dialect: OpenAI{}},
		0, []exchange{
			{0, 200, h("X-Ratelimit-Limit-Requests", "600", "X-Ratelimit-Remaining-Requests", "1"), ""},
			{0, 200, h("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "200ms"), ""},
			{0, 429, h("X-Ratelimit-Remaining-Requests", "0"), "rate_limit_exceeded"},
		})
	runExchanges(t, Config{Limit: 10, Burst: 2, StatedLimit: 600, StatedWindow: time.Minute, Dialect: Anthropic{}},
		0, []exchange{
			{0, 200, h("Anthropic-Ratelimit-Requests-Limit", "600", "Anthropic-Ratelimit-Requests-Remaining", "1",
				"Anthropic-Ratelimit-Requests-Reset", "2026-03-10T12:00:01Z"), ""},
			{0, 200, h("Anthropic-Ratelimit-Requests-Remaining", "0"), ""},
			{0, 429, h("Retry-After", "1"), "rate_limit_error"},
		})
}

func TestShopifyRoundsRetryAfterToTheSecond(t *testing.T) {
	runExchanges(t, Config{Algorithm: LeakyBucket, Limit: 10, Burst: 1, Dialect: Shopify{Round: time.Second}},
		0, []exchange{
			{0, 200, h("X-Shopify-Shop-Api-Call-Limit", "1/1"), ""},
			{0, 429, h("Retry-After", "1.0"), "Exceeded 10 calls per second"},
		})
}

// Routes "/a" and "/b" share a bucket, "/c" has its own; a global limit of
// three a second covers all of them.
func TestDiscordRouteBucketsUnderAGlobalLimit(t *testing.T) {
	clk := newClock()
	route := map[string]string{"/a": "ab", "/b": "ab", "/c": "c"}
	s := New(Config{
		Algorithm: FixedWindow, Limit: 2, Window: time.Second, Now: clk.Now,
		Key:     func(r *http.Request) string { return route[r.URL.Path] },
		Global:  GlobalLimit{Algorithm: FixedWindow, Limit: 3, Window: time.Second},
		Dialect: Discord{},
	})
	want := []struct {
		path   string
		status int
		global string
	}{
		{"/a", 200, ""}, {"/b", 200, ""}, {"/a", 429, ""}, // the shared bucket is spent
		{"/c", 429, "true"}, // the global window is spent: three went in
	}
	var buckets []string
	for i, w := range want {
		resp := get(s, w.path)
		body, _ := io.ReadAll(resp.Body)
		assert.Equal(t, w.status, resp.StatusCode, "request %d", i)
		assert.Equal(t, w.global, resp.Header.Get("X-Ratelimit-Global"), "request %d", i)
		if w.global != "" {
			assert.Empty(t, resp.Header.Get("X-Ratelimit-Bucket"))
			assert.Contains(t, string(body), `"global":true`)
			assert.Equal(t, "global", resp.Header.Get("X-Ratelimit-Scope"))
		} else {
			buckets = append(buckets, resp.Header.Get("X-Ratelimit-Bucket"))
		}
	}
	assert.Equal(t, buckets[0], buckets[1], "routes of one bucket name it alike")
	clk.Advance(time.Second)
	resp := get(s, "/c")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.NotEqual(t, buckets[0], resp.Header.Get("X-Ratelimit-Bucket"))
	assert.Equal(t, int64(0), s.Stats().Early)
	get(s, "/c")
	get(s, "/c")
	resp = get(s, "/a") // a fourth in the second: global
	assert.Equal(t, "true", resp.Header.Get("X-Ratelimit-Global"))
	get(s, "/a") // told to wait for the global window: early
	assert.Equal(t, int64(1), s.Stats().Early)
}

// TestLeastCountsEachKeysWindows checks that the least time of a fixed
// window shape counts the windows of the key (or token) that takes the
// most of the requests: six routes in turn, two of them in one bucket of
// 5 a second, take 2 of every 6 requests.
func TestLeastCountsEachKeysWindows(t *testing.T) {
	shapes := map[string]Shape{}
	for _, sh := range SparseShapes() {
		shapes[sh.Name] = sh
	}
	start := time.Unix(1773144000, 0).Add(-300 * time.Millisecond) // 0.7 s into a window
	for _, c := range []struct {
		name string
		n    int
		want time.Duration
	}{
		{"discord-routes", 315, 21*time.Second - 700*time.Millisecond}, // 106 to the bucket: 22 windows
		{"discord-routes", 195, 13*time.Second - 700*time.Millisecond}, // 66: 14 windows
		{"discord-routes", 180, 11*time.Second - 700*time.Millisecond}, // 60: 12 windows
		{"discord-routes", 5, 0}, // one window
		{"discord-routes-global", 210, 20*time.Second - 700*time.Millisecond},     // 21 global windows; the bucket needs 14
		{"fixed-window-date-skewed", 140, 12*time.Second - 1700*time.Millisecond}, // 7 windows of 2 s; 1.7 s into one on a clock 30 s ahead
	} {
		if got := shapes[c.name].Least(c.n, start); got != c.want {
			t.Errorf("%s: Least(%d) = %v, want %v", c.name, c.n, got, c.want)
		}
	}
}

// TestLeastForCountsWhatWorkersCanSend checks that a run begun near the
// end of a fixed window needs a window more when its workers cannot send
// the window's quota before it ends.
func TestLeastForCountsWhatWorkersCanSend(t *testing.T) {
	var sh Shape // 20 per 2 s, 20 ms a request, a clock 30 s ahead
	for _, s := range SparseShapes() {
		if s.Name == "fixed-window-date-skewed" {
			sh = s
		}
	}
	at := func(phase time.Duration) time.Time { return time.Unix(1773144000, 0).Add(phase) } // on the server's clock too
	for _, c := range []struct {
		phase   time.Duration
		workers int
		want    time.Duration
	}{
		{1993 * time.Millisecond, 8, 14*time.Second - 1993*time.Millisecond},  // 8 in the first window: 8 windows
		{1993 * time.Millisecond, 32, 12*time.Second - 1993*time.Millisecond}, // 20 of 32 in it: 7, as Least says
		{1950 * time.Millisecond, 8, 12*time.Second - 1950*time.Millisecond},  // 8 × 3 ≥ 20
		{1970 * time.Millisecond, 8, 14*time.Second - 1970*time.Millisecond},  // 8 × 2 < 20
		{500 * time.Millisecond, 8, 12*time.Second - 500*time.Millisecond},    // time enough
	} {
		assert.Equal(t, c.want, sh.LeastFor(140, c.workers, at(c.phase)), "%v, %d workers", c.phase, c.workers)
		if c.workers == 32 || c.phase == 500*time.Millisecond {
			assert.Equal(t, sh.Least(140, at(c.phase)), sh.LeastFor(140, c.workers, at(c.phase)))
		}
	}
	discord := SparseShapes()[2]
	assert.Equal(t, "discord-routes", discord.Name)
	assert.Equal(t, discord.Least(195, at(990*time.Millisecond)), discord.LeastFor(195, 8, at(990*time.Millisecond)), "several keys: Least")
}
