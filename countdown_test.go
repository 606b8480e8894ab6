package headway_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway"
)

// TestTokenBucketNextRefill replays Stack Overflow for Teams API v3, whose
// token bucket (5,000 tokens, 100 more every 60 seconds) states what is
// left, the seconds until it is full and the seconds until its next
// refill, and whose burst throttle states its own (Rate Limiting and
// Throttling: x-token-bucket-calls-left, -seconds-until-full,
// -seconds-until-next-refill; x-burst-throttle-calls-left,
// -seconds-until-full). The bucket is empty: the server rejects every
// request until its next refill, 42 s on, and then admits them. The
// client waits for that refill, once, not for the 50 minutes until the
// bucket is full (which it would hand back as too long), and does not
// knock on it in between.
func TestTokenBucketNextRefill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		refill := start.Add(42 * time.Second)
		var (
			mu       sync.Mutex
			rejected int
		)
		base := delayRT(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			h := http.Header{}
			h.Set("x-burst-throttle-calls-left", "49")
			h.Set("x-burst-throttle-seconds-until-full", "1")
			status := http.StatusOK
			if now := time.Now(); now.Before(refill) {
				rejected++
				status = http.StatusTooManyRequests
				h.Set("x-token-bucket-calls-left", "0")
				h.Set("x-token-bucket-seconds-until-full", "3000")
				h.Set("x-token-bucket-seconds-until-next-refill", strconv.Itoa(int(refill.Sub(now).Seconds()+0.999)))
			} else {
				h.Set("x-token-bucket-calls-left", "99")
				h.Set("x-token-bucket-seconds-until-full", "2940")
				h.Set("x-token-bucket-seconds-until-next-refill", "60")
			}
			return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
		})
		client := &http.Client{Transport: headway.New(base)}
		resp, err := client.Get("http://teams.test/api/v3/questions")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		t.Logf("%d after %v, %d rejected", resp.StatusCode, took, rejected)
		if resp.StatusCode != http.StatusOK || took < 42*time.Second || took > 50*time.Second {
			t.Errorf("got %d after %v, want 200 after the refill 42 s on", resp.StatusCode, took)
		}
		if rejected != 1 {
			t.Errorf("%d requests rejected, want 1: none sent before the refill", rejected)
		}
	})
}
