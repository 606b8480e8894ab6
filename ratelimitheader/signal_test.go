package ratelimitheader

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vector is one line of testdata/vectors.jsonl, the shared header vectors.
type vector struct {
	ID       string      `json:"id"`
	Source   string      `json:"source"`
	Status   int         `json:"status"`
	LocalNow time.Time   `json:"local_now"`
	Headers  [][2]string `json:"headers"`
	Body     string      `json:"body"`
	// MillisecondResets and MillisecondDelays, this package's own additions
	// to the shared format, set the Input fields of those names: the
	// response as read by a client that learned the server's units from its
	// earlier responses.
	MillisecondResets bool `json:"millisecond_resets"`
	MillisecondDelays bool `json:"millisecond_delays"`
	Expect            struct {
		Throttled     bool     `json:"throttled"`
		WaitS         *float64 `json:"wait_s"`
		WaitTolerance *float64 `json:"wait_tolerance_s"`
		TooLong       bool     `json:"too_long"`
		Retryable     bool     `json:"retryable"`
		// Remaining and WindowS: absent (no check), null, or a number.
		Remaining json.RawMessage `json:"remaining"`
		WindowS   json.RawMessage `json:"window_s"`
		Scope     string          `json:"scope"`
		// Limit and PeriodS, this package's own additions to the shared
		// format: absent (no check), or the size and length in seconds of
		// the window Remaining belongs to, 0 where the response states none.
		Limit   *int64   `json:"limit"`
		PeriodS *float64 `json:"period_s"`
	} `json:"expect"`
}

func loadVectors(t testing.TB) []vector {
	f, err := os.Open("testdata/vectors.jsonl")
	require.NoError(t, err)
	defer f.Close()
	var vs []vector
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var v vector
		require.NoError(t, json.Unmarshal(sc.Bytes(), &v), sc.Text())
		vs = append(vs, v)
	}
	require.NoError(t, sc.Err())
	return vs
}

func (v vector) input() *Input {
	h := http.Header{}
	for _, kv := range v.Headers {
		h.Add(kv[0], kv[1])
	}
	in := &Input{Status: v.Status, Header: h, Now: v.LocalNow,
		MillisecondResets: v.MillisecondResets, MillisecondDelays: v.MillisecondDelays}
	if v.Body != "" {
		in.Body = []byte(v.Body)
	}
	return in
}

func seconds(d time.Duration) float64 { return d.Seconds() }

func TestSignalVectors(t *testing.T) {
	vs := loadVectors(t)
	require.NotEmpty(t, vs)
	for _, v := range vs {
		t.Run(v.ID, func(t *testing.T) {
			s := Parse(v.input())
			e := v.Expect
			assert.Equal(t, e.Throttled, s.Throttled, "throttled")
			assert.Equal(t, e.Retryable, !s.Permanent, "retryable")
			assert.Equal(t, e.TooLong, s.OverMaxServerWait, "too_long")
			scope := e.Scope
			if scope == "" {
				scope = "key"
			}
			assert.Equal(t, scope, s.Scope.String(), "scope")

			tol := 1.0
			if e.WaitTolerance != nil {
				tol = *e.WaitTolerance
			}
			switch {
			case e.TooLong:
				// The stated delay is kept, but it is not one to sleep on.
			case e.WaitS == nil:
				assert.False(t, s.HasWait, "wait_s null: no usable wait, got %v", s.Wait)
			case *e.WaitS == 0 && !e.Throttled:
				assert.Zero(t, s.Wait, "wait_s 0")
			default:
				assert.True(t, s.HasWait, "wait_s %v: HasWait", *e.WaitS)
				assert.InDelta(t, *e.WaitS, seconds(s.Wait), tol, "wait_s")
			}

			if len(e.Remaining) > 0 {
				var want *int64
				require.NoError(t, json.Unmarshal(e.Remaining, &want))
				if want == nil {
					assert.False(t, s.HasRemaining, "remaining null, got %d", s.Remaining)
				} else {
					assert.True(t, s.HasRemaining, "remaining known")
					assert.Equal(t, *want, s.Remaining, "remaining")
				}
			}
			if len(e.WindowS) > 0 {
				var want *float64
				require.NoError(t, json.Unmarshal(e.WindowS, &want))
				if want != nil {
					assert.InDelta(t, *want, seconds(s.Reset), tol, "window_s")
				}
			}
			if e.Limit != nil {
				assert.Equal(t, *e.Limit, s.Limit, "limit")
			}
			if e.PeriodS != nil {
				assert.InDelta(t, *e.PeriodS, seconds(s.Period), 1e-9, "period_s")
			}
			checkInvariants(t, s)
		})
	}
}

// checkInvariants holds for every Signal Parse returns.
func checkInvariants(t testing.TB, s Signal) {
	t.Helper()
	if s.Wait < 0 || s.Reset < 0 || s.Period < 0 || s.Limit < 0 || s.Remaining < 0 {
		t.Fatalf("negative field in %+v", s)
	}
	if !s.HasWait && (s.Wait != 0 || s.RetryAfter || s.OverMaxServerWait) {
		t.Fatalf("wait set without HasWait: %+v", s)
	}
	if s.OverMaxServerWait && (!s.HasWait || s.Wait <= 0 || !s.RetryAfter && !s.Throttled) {
		t.Fatalf("OverMaxServerWait without a long delay: %+v", s)
	}
	if !s.HasRemaining && s.Remaining != 0 {
		t.Fatalf("Remaining without HasRemaining: %+v", s)
	}
	if s.Scope != ScopeKey && s.Scope != ScopeGlobal {
		t.Fatalf("bad scope: %+v", s)
	}
}

func TestSignalSaturates(t *testing.T) {
	s := Parse(&Input{Status: 429, Header: http.Header{"Retry-After": {"99999999999999999999"}}})
	assert.True(t, s.OverMaxServerWait)
	assert.Equal(t, time.Duration(math.MaxInt64), s.Wait)
}

// signalCase is a response and the exact Signal expected from it.
type signalCase struct {
	name    string
	status  int
	headers [][2]string
	body    string
	want    Signal
	// msDelays sets Input.MillisecondDelays.
	msDelays bool
}

// caseNow is the local clock of every signalCase; dateNow its Date header.
var (
	caseNow = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	dateNow = [2]string{"Date", "Tue, 10 Mar 2026 12:00:00 GMT"}
)

func runCases(t *testing.T, p *Parser, cases []signalCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for _, kv := range c.headers {
				h[kv[0]] = append(h[kv[0]], kv[1]) // keys as given, even non-canonical
			}
			in := &Input{Status: c.status, Header: h, Now: caseNow, MillisecondDelays: c.msDelays}
			if c.body != "" {
				in.Body = []byte(c.body)
			}
			got := p.Parse(in)
			assert.Equal(t, c.want, got)
			checkInvariants(t, got)
		})
	}
}

func TestScopeString(t *testing.T) {
	assert.Equal(t, "key", ScopeKey.String())
	assert.Equal(t, "global", ScopeGlobal.String())
}

func TestAddQuota(t *testing.T) {
	var s Signal
	s.AddQuota(Quota{Remaining: -1, Reset: time.Second})
	assert.Equal(t, Signal{}, s, "negative remaining ignored")

	s.AddQuota(Quota{Remaining: 10, Reset: 30 * time.Second, Limit: 100, Period: time.Minute})
	s.AddQuota(Quota{Remaining: 0, Reset: 2 * time.Hour, Unit: "tokens"})
	assert.Equal(t, Signal{Wait: 2 * time.Hour, HasWait: true, Remaining: 10, HasRemaining: true,
		Reset: 30 * time.Second, Limit: 100, Period: time.Minute}, s, "tokens govern the wait, not Remaining")

	s.AddRetryAfter(5 * time.Second)
	s.AddQuota(Quota{Remaining: 0, Reset: time.Hour})
	assert.Equal(t, 5*time.Second, s.Wait, "a stated delay wins whatever the order")
	assert.Equal(t, int64(0), s.Remaining)
	s.AddRetryAfter(-time.Second)
	assert.Equal(t, 5*time.Second, s.Wait, "the longest stated delay wins")
}

// The window that binds is the one with the fewest requests left, what a
// client may spend at once without going over any of them, whatever their
// lengths; of as many left, the one that resets last. As many left of
// windows of other lengths are two windows, not one described twice.
func TestAddQuotaBinding(t *testing.T) {
	const s = time.Second
	for _, c := range []struct {
		name string
		qs   []Quota
		want Signal
	}{
		{name: "20 per 10 s bind more than 60 per 900 s",
			qs:   []Quota{{Remaining: 20, Limit: 100, Period: 10 * s}, {Remaining: 60, Limit: 100, Period: 900 * s}},
			want: Signal{Remaining: 20, HasRemaining: true, Limit: 100, Period: 10 * s}},
		{name: "in either order",
			qs:   []Quota{{Remaining: 60, Limit: 100, Period: 900 * s}, {Remaining: 20, Limit: 100, Period: 10 * s}},
			want: Signal{Remaining: 20, HasRemaining: true, Limit: 100, Period: 10 * s}},
		{name: "windows of one length: the fewest left",
			qs:   []Quota{{Remaining: 80, Limit: 100, Period: 10 * s}, {Remaining: 4, Limit: 300, Period: 10 * s}},
			want: Signal{Remaining: 4, HasRemaining: true, Limit: 300, Period: 10 * s}},
		{name: "what is left of a window counts, not its length",
			qs:   []Quota{{Remaining: 2, Reset: 50 * s, Period: 60 * s}, {Remaining: 100, Reset: 100 * s, Period: 3600 * s}},
			want: Signal{Remaining: 2, HasRemaining: true, Reset: 50 * s, Period: 60 * s}},
		{name: "a window of unknown length: the fewest left",
			qs:   []Quota{{Remaining: 20, Period: 10 * s}, {Remaining: 60}},
			want: Signal{Remaining: 20, HasRemaining: true, Period: 10 * s}},
		{name: "an exhausted window binds whatever its length",
			qs:   []Quota{{Remaining: 5, Period: 3600 * s}, {Remaining: 0, Period: s}},
			want: Signal{HasRemaining: true, Period: s}},
		{name: "as many left of windows of other lengths are two windows",
			qs:   []Quota{{Remaining: 20, Limit: 100, Period: 10 * s, Reset: 4 * s}, {Remaining: 20, Limit: 100, Period: 900 * s, Reset: 600 * s}},
			want: Signal{Remaining: 20, HasRemaining: true, Limit: 100, Period: 900 * s, Reset: 600 * s}},
		{name: "one window described twice completes itself",
			qs:   []Quota{{Remaining: 3, Limit: 10, Period: 60 * s}, {Remaining: 3, Reset: 25 * s, Limit: 10}},
			want: Signal{Remaining: 3, HasRemaining: true, Reset: 25 * s, Limit: 10, Period: 60 * s}},
		{name: "huge counts and lengths",
			qs:   []Quota{{Remaining: 1<<63 - 1, Reset: maxDuration}, {Remaining: 1 << 62, Reset: s}},
			want: Signal{Remaining: 1 << 62, HasRemaining: true, Reset: s}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got Signal
			for _, q := range c.qs {
				got.AddQuota(q)
			}
			assert.Equal(t, c.want, got)
		})
	}
}

func TestCustomDialects(t *testing.T) {
	acme := DialectFunc(func(in *Input, s *Signal) {
		if n, ok := parseCount(in.Header.Get("X-Acme-Quota-Left")); ok {
			s.AddQuota(Quota{Remaining: int64(n), Reset: time.Minute})
		}
	})
	p := &Parser{Dialects: append(DefaultDialects(), acme)}
	runCases(t, p, []signalCase{
		{name: "custom dialect runs", status: 200, headers: [][2]string{dateNow, {"X-Acme-Quota-Left", "0"}},
			want: Signal{Wait: time.Minute, HasWait: true, HasRemaining: true, Reset: time.Minute}},
		{name: "with the built-ins", status: 200, headers: [][2]string{{"X-Acme-Quota-Left", "9"}, {"X-Ratelimit-Remaining", "3"}},
			want: Signal{Remaining: 3, HasRemaining: true}},
	})
	runCases(t, &Parser{Dialects: []Dialect{}}, []signalCase{
		{name: "no dialect: Retry-After still read", status: 429, headers: [][2]string{{"Retry-After", "3"}, {"X-Ratelimit-Remaining", "0"}},
			want: Signal{Throttled: true, Wait: 3 * time.Second, HasWait: true, RetryAfter: true}},
	})
	assert.Len(t, DefaultDialects(), len(builtinDialects))
	for _, d := range DefaultDialects() {
		assert.NotEmpty(t, fmt.Sprint(d))
	}
}
