package headway

import (
	"context"
	"math"
	"net/http"
	"net/http/httptrace"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 9, item 8: the smaller defects.

// A limit too fine or too large for the pacer's nanoseconds panics with
// the documented invalid-limit error, not a division by zero.
func TestAHugeLimitPanicsAsDocumented(t *testing.T) {
	assert.PanicsWithError(t, "headway: invalid limit 9223372036854775807/1h0m0s burst 9223372036854775807: Burst spans more than 876000h0m0s",
		func() { New(nil, WithLimit(Per(math.MaxInt, time.Hour).WithBurst(math.MaxInt))) })
	assert.Equal(t, time.Nanosecond, Per(math.MaxInt, time.Hour).Interval())
	assert.Equal(t, 333333334*time.Nanosecond, Per(3, time.Second).Interval(), "rounded up")
	assert.NotPanics(t, func() { New(nil, WithLimit(Per(math.MaxInt, time.Hour))) })
}

// A nil dialect is left out, and a base that returns neither a response
// nor an error gets an error back, not a panic.
func TestNilsDoNotPanic(t *testing.T) {
	for _, status := range []int{503, 200} {
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
		})
		tr := New(base, WithDialects(nil), WithRetry(RetryOptions{MaxAttempts: 1}))
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
		require.NoError(t, err)
		assert.Equal(t, status, resp.StatusCode)
	}
	tr := New(roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil }),
		WithRetry(RetryOptions{MaxAttempts: 1}))
	resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
	assert.Nil(t, resp)
	assert.ErrorIs(t, err, errNilResponse)
}

// The README's word on the first attempt holds: a request without a body
// reaches the base as it came, once the host's first answer showed that
// the base is not net/http's (before, and with net/http's, it goes as a
// shallow copy on a context derived from its own that carries headway's
// client trace: see connWatch).
func TestTheFirstAttemptWithoutABodyGoesAsItCame(t *testing.T) {
	var got *http.Request
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	}))
	type key struct{}
	for i := range 2 {
		req := mustReq(t, "http://api.test/")
		req = req.WithContext(context.WithValue(req.Context(), key{}, "caller's"))
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		drain(resp)
		if i == 0 {
			// The host's first answer: watched.
			require.NotNil(t, httptrace.ContextClientTrace(got.Context()), "the first attempt carries headway's trace")
			assert.Equal(t, "caller's", got.Context().Value(key{}), "on a context derived from the request's")
			copied := *got
			copied = *copied.WithContext(req.Context())
			assert.Equal(t, *req, copied, "a shallow copy of the request but for its context")
			continue
		}
		assert.Same(t, req, got)
	}
}
