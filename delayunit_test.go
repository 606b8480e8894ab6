package headway_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway"
)

// TestDelaysInMillisecondsLearned replays Discord before API v8, whose
// 429s state their delay in milliseconds, Retry-After included (Discord
// API docs, v6: "retry_after: the number of milliseconds to wait", the
// example 429 with Retry-After: 6457 beside X-RateLimit-Reset-After: 7).
// A route's 429 shows the unit (its window resets within a second of the
// delay in milliseconds); the global limit's 429 that follows on another
// route has no window to show it (Retry-After: 250, X-RateLimit-Global:
// true, retry_after: 250). Read as the host's earlier answer showed, it is
// a quarter of a second, not four minutes: the request gets through a
// quarter of a second later.
func TestDelaysInMillisecondsLearned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu                 sync.Mutex
			routeDone, glob429 bool
		)
		base := delayRT(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			h := http.Header{"Content-Type": {"application/json"}}
			status, body := http.StatusOK, "{}"
			switch {
			case req.URL.Path == "/channels/1/messages" && !routeDone:
				routeDone = true
				status = http.StatusTooManyRequests
				h.Set("Retry-After", "300")
				h.Set("X-RateLimit-Limit", "5")
				h.Set("X-RateLimit-Remaining", "0")
				h.Set("X-RateLimit-Reset-After", "1")
				h.Set("X-RateLimit-Bucket", "abcd1234")
				body = `{"message": "You are being rate limited.", "retry_after": 300, "global": false}`
			case req.URL.Path == "/channels/2/messages" && !glob429:
				glob429 = true
				status = http.StatusTooManyRequests
				h.Set("Retry-After", "250")
				h.Set("X-RateLimit-Global", "true")
				body = `{"message": "You are being rate limited.", "retry_after": 250, "global": true}`
			}
			return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
		})
		client := &http.Client{Transport: headway.New(base)}
		get := func(path string) (time.Duration, int) {
			start := time.Now()
			resp, err := client.Get("http://discord.test" + path)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return time.Since(start), resp.StatusCode
		}
		if took, code := get("/channels/1/messages"); code != http.StatusOK || took > time.Second {
			t.Errorf("route's 429: got %d after %v, want 200 after 300 ms", code, took)
		}
		took, code := get("/channels/2/messages")
		t.Logf("global 429: %d after %v", code, took)
		if code != http.StatusOK || took < 250*time.Millisecond || took > 2*time.Second {
			t.Errorf("global 429: got %d after %v, want 200 after 250 ms", code, took)
		}
	})
}

type delayRT func(*http.Request) (*http.Response, error)

func (f delayRT) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
