package headway

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
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
// reaches the base as it came.
func TestTheFirstAttemptWithoutABodyGoesAsItCame(t *testing.T) {
	req := mustReq(t, "http://api.test/")
	var got *http.Request
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	}))
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	drain(resp)
	assert.Same(t, req, got)
}

// manyMembers returns RateLimit and RateLimit-Policy fields of n members
// each, the last the tightest.
func manyMembers(n int) http.Header {
	lim, pol := make([]string, n), make([]string, n)
	for i := range n {
		lim[i] = fmt.Sprintf(`"p%d";r=%d;t=10`, i, n-i)
		pol[i] = fmt.Sprintf(`"p%d";q=%d;w=60`, i, n+1)
	}
	return http.Header{"Ratelimit": {strings.Join(lim, ", ")}, "Ratelimit-Policy": {strings.Join(pol, ", ")}}
}

// A RateLimit field cannot hold RoundTrip for seconds: up to maxMembers
// members are read (each policy found by name), a field with more is
// ignored whole (50,000 members and policies took 6.4 s before).
func TestManyRateLimitMembersAreBounded(t *testing.T) {
	s := ParseSignal(&SignalInput{Status: 429, Header: manyMembers(maxMembers)})
	assert.Equal(t, Signal{Throttled: true, Remaining: 1, HasRemaining: true,
		Reset: 10 * time.Second, Limit: maxMembers + 1, Period: time.Minute}, s)
	s = ParseSignal(&SignalInput{Status: 429, Header: manyMembers(50000)})
	assert.Equal(t, Signal{Throttled: true}, s, "a field of 50,000 members is ignored")
}

// BenchmarkManyRateLimitMembers measures a response whose RateLimit and
// RateLimit-Policy fields hold n members each.
func BenchmarkManyRateLimitMembers(b *testing.B) {
	for _, n := range []int{10, maxMembers, 50000} {
		h := manyMembers(n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				ParseSignal(&SignalInput{Status: 429, Header: h})
			}
		})
	}
}
