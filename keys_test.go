package headway

import (
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// A key costs little memory until its server says something worth
// remembering: an unbounded number of keys stays cheap between sweeps.
func TestAKeyIsSmall(t *testing.T) {
	if size := unsafe.Sizeof(keyState{}); size > 1024 {
		t.Errorf("keyState is %d bytes", size)
	}
}

// A key whose request is in flight is not idle: a sweep must not drop it,
// or the pause its response names is lost (issue 9, item 1).
func TestASweepKeepsAKeyWithARequestInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		rt := &adaptRT{script: func(_ int, req *http.Request) (int, http.Header) {
			if req.URL.Path == "/a" {
				<-release
				return 429, hdr("Retry-After", "2")
			}
			return 200, nil
		}}
		tr := New(rt, WithKey(KeyByPath), WithRetry(RetryOptions{MaxAttempts: 1}))
		done := make(chan *http.Response)
		go func() { done <- get(t, tr, "http://api.test/a") }()
		synctest.Wait()
		for i := range 5000 {
			get(t, tr, fmt.Sprintf("http://api.test/k%d", i))
		}
		close(release)
		assert.Equal(t, 429, (<-done).StatusCode)
		throttledAt := time.Now()
		get(t, tr, "http://api.test/a")
		assert.Equal(t, 2*time.Second, time.Since(throttledAt), "the pause of the key in flight was lost")
	})
}

// A key whose breaker is open is not idle: a sweep must not drop it, or
// its next request goes to a server the breaker knows to be failing.
func TestASweepKeepsAKeyWithAnOpenBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &adaptRT{script: func(_ int, req *http.Request) (int, http.Header) {
			if req.URL.Path == "/a" {
				return 503, hdr("Retry-After", "1") // a failure to the breaker; the host is up
			}
			return 200, nil
		}}
		tr := New(rt, WithKey(KeyByPath), WithRetry(RetryOptions{MaxAttempts: 1}),
			WithBreaker(BreakerSettings{ConsecutiveFailures: 1, Timeout: time.Hour}))
		assert.Equal(t, 503, get(t, tr, "http://api.test/a").StatusCode)
		time.Sleep(11 * time.Minute) // what the 503 taught is forgotten; the breaker stays open
		for i := range 5000 {
			get(t, tr, fmt.Sprintf("http://api.test/k%d", i))
		}
		_, err := tr.RoundTrip(mustReq(t, "http://api.test/a"))
		assert.ErrorIs(t, err, ErrCircuitOpen, "the open breaker was dropped")
	})
}
