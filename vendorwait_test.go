package headway

import (
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// The delays vendors state in their own ways, read through the Transport as
// a user gets them: a GET throttled once is sent again after the wait the
// response named, not after the client's own backoff (500 ms to start), and
// a would-be delay beside an enforced one does not hand the request back.
func TestVendorStatedDelaysPauseTheRetry(t *testing.T) {
	for _, c := range []struct {
		name     string
		header   http.Header
		body     string
		least    time.Duration // the retry goes no sooner
		most     time.Duration // and no later
		attempts int
	}{
		{name: "Mailgun's body retry-seconds", body: "{\n  \"retry-seconds\": 3,\n}",
			least: 3 * time.Second, most: 4 * time.Second, attempts: 2},
		{name: "Salesforce Marketing Cloud's body retryAfter", body: `{"errorcode":50100,"retryAfter":3}`,
			least: 3 * time.Second, most: 4 * time.Second, attempts: 2},
		{name: "Segment's body msBeforeNext", body: `{"errors":[{"type":"RequestError","data":{"remainingPoints":0,"msBeforeNext":2500}}]}`,
			least: 2500 * time.Millisecond, most: 3500 * time.Millisecond, attempts: 2},
		{name: "a body's delay in milliseconds beside Retry-After in seconds", header: hdr("Retry-After", "2"), body: `{"retryAfter":2000}`,
			least: 2 * time.Second, most: 3 * time.Second, attempts: 2},
		{name: "Auth0's spent token quota", header: hdr("Auth0-Client-Quota-Limit", "b=per_hour;q=10;r=0;t=4,b=per_day;q=50;r=40;t=43200"),
			least: 4 * time.Second, most: 5 * time.Second, attempts: 2},
		{name: "Atlassian's burst Retry-After beside a would-be Beta-Retry-After", header: hdr("Retry-After", "2", "Beta-Retry-After", "2788"),
			least: 2 * time.Second, most: 3 * time.Second, attempts: 2},
		{name: "Atlassian's Beta-Retry-After alone", header: hdr("Beta-Retry-After", "3"),
			least: 3 * time.Second, most: 4 * time.Second, attempts: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var (
					mu   sync.Mutex
					sent []time.Time
				)
				base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
					mu.Lock()
					sent = append(sent, time.Now())
					n := len(sent)
					mu.Unlock()
					if n == 1 {
						h := c.header.Clone()
						if h == nil {
							h = http.Header{}
						}
						return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h, Body: readCloser(c.body), Request: req}, nil
					}
					return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: readCloser("ok"), Request: req}, nil
				})
				resp := get(t, New(base), "http://api.test/")
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				mu.Lock()
				defer mu.Unlock()
				if assert.Len(t, sent, c.attempts) {
					gap := sent[1].Sub(sent[0])
					assert.GreaterOrEqual(t, gap, c.least, "the retry went inside the stated wait")
					assert.LessOrEqual(t, gap, c.most, "the retry waited past the stated wait")
				}
			})
		})
	}
}
