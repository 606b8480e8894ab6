package headway

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scripted is a base RoundTripper whose n-th answer (from 0) is answer(n),
// a 200 when answer returns status 0.
type scripted struct {
	answer func(n int) (status int, header http.Header, body string)

	mu   sync.Mutex
	sent []time.Time
}

func (s *scripted) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	n := len(s.sent)
	s.sent = append(s.sent, time.Now())
	s.mu.Unlock()
	status, h, body := s.answer(n)
	if status == 0 {
		status = http.StatusOK
	}
	if h == nil {
		h = http.Header{}
	}
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
}

func (s *scripted) times() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.sent...)
}

// timedGet sends a GET for url through tr and returns its status, or -1 on an
// error, and how long it took.
func timedGet(t *testing.T, tr http.RoundTripper, url string) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	resp, err := tr.RoundTrip(mustReq(t, url))
	if err != nil {
		return -1, time.Since(start)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start)
}

// TestTransportContention: Stripe's lock_timeout is contention on one
// object: the request is retried after a backoff, and the key is neither
// paused nor slowed for the others.
func TestTransportContention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{answer: func(n int) (int, http.Header, string) {
			if n == 0 {
				return 429, http.Header{"Stripe-Should-Retry": {"true"}}, `{"error":{"code":"lock_timeout","type":"invalid_request_error"}}`
			}
			return 0, nil, "{}"
		}}
		var hc hookCounts
		// preset.StripeTest's limit and key.
		stripe := Preset{Name: "stripe-test", Host: "api.stripe.com", Limits: []Limit{PerSecond(25).WithBurst(5)}, Key: KeyByHeader("Authorization")}
		tr := New(base, stripe, hc.option())
		defer tr.CloseIdleConnections()
		status, _ := timedGet(t, tr, "https://api.stripe.com/v1/payment_intents/pi_1")
		assert.Equal(t, 200, status, "retried")
		assert.Zero(t, hc.throttled.Load(), "not counted as a throttle")

		// The key goes on at the preset's pace (25 a second, burst 5).
		start := time.Now()
		for range 20 {
			status, _ := timedGet(t, tr, "https://api.stripe.com/v1/customers")
			require.Equal(t, 200, status)
		}
		assert.LessOrEqual(t, time.Since(start), time.Second, "the key was slowed down")
	})
}

// TestTransportPerIssueWrite: Atlassian's per-issue write limit retries
// the request after its Retry-After, without pausing the other requests
// of the endpoint.
func TestTransportPerIssueWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{answer: func(n int) (int, http.Header, string) {
			if n == 0 {
				return 429, http.Header{"Retry-After": {"3"}, "Ratelimit-Reason": {"jira-per-issue-on-write"}}, ""
			}
			return 0, nil, ""
		}}
		// preset.Jira has no limits; its key is one for both issues, as here.
		tr := New(base)
		defer tr.CloseIdleConnections()
		var wg sync.WaitGroup
		var first time.Duration
		wg.Go(func() {
			var status int
			status, first = timedGet(t, tr, "https://acme.atlassian.net/rest/api/3/issue/ABC-1")
			assert.Equal(t, 200, status)
		})
		time.Sleep(10 * time.Millisecond)
		status, took := timedGet(t, tr, "https://acme.atlassian.net/rest/api/3/issue/ABC-2")
		wg.Wait()
		assert.Equal(t, 200, status)
		assert.Less(t, took, time.Second, "another issue waited for the first one's limit")
		assert.GreaterOrEqual(t, first, 3*time.Second, "the retry waited for Retry-After")
	})
}

// TestTransportNotARateLimit: a 429 that only money cures (Anthropic's
// extra usage) goes back at once, is not retried, and does not slow the
// key.
func TestTransportNotARateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{answer: func(n int) (int, http.Header, string) {
			if n == 0 {
				return 429, nil, `{"type":"error","error":{"type":"rate_limit_error","message":"Extra usage is required for long context requests."}}`
			}
			return 0, nil, ""
		}}
		tr := New(base)
		defer tr.CloseIdleConnections()
		status, took := timedGet(t, tr, "https://api.anthropic.com/v1/messages")
		assert.Equal(t, 429, status)
		assert.Zero(t, took)
		require.Len(t, base.times(), 1, "not retried")
		start := time.Now()
		for range 20 {
			timedGet(t, tr, "https://api.anthropic.com/v1/messages")
		}
		assert.Less(t, time.Since(start), time.Second, "the key was slowed down")
	})
}

// TestTransportRetryInfo: Gemini names its wait in the body only; the key
// pauses for it and the request goes again when it is over, not before.
func TestTransportRetryInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{answer: func(n int) (int, http.Header, string) {
			if n == 0 {
				return 429, nil, `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[` +
					`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2.500s"}]}}`
			}
			return 0, nil, "{}"
		}}
		// preset.Gemini(600, 1_000_000)'s limits.
		tr := New(base, WithLimit(Per(600, time.Minute).WithBurst(10).Requests(), Per(1_000_000, time.Minute).WithBurst(1_000_000)))
		defer tr.CloseIdleConnections()
		status, took := timedGet(t, tr, "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent")
		assert.Equal(t, 200, status)
		sent := base.times()
		require.Len(t, sent, 2)
		assert.GreaterOrEqual(t, sent[1].Sub(sent[0]), 2500*time.Millisecond)
		assert.Less(t, took, 3*time.Second)
	})
}

// TestTransportSpentDailyQuota: a 429 whose quota resets a day later, with
// no Retry-After, goes back at once instead of being slept on.
func TestTransportSpentDailyQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{answer: func(n int) (int, http.Header, string) {
			reset := time.Now().Add(24 * time.Hour).Unix()
			return 429, http.Header{"X-Ratelimit-Limit": {"1000"}, "X-Ratelimit-Remaining": {"0"},
				"X-Ratelimit-Reset": {fmt.Sprint(reset)}}, ""
		}}
		tr := New(base)
		defer tr.CloseIdleConnections()
		status, took := timedGet(t, tr, "https://api.example.com/v1/things")
		assert.Equal(t, 429, status)
		assert.Zero(t, took)
		assert.Len(t, base.times(), 1, "not retried")
	})
}
