package ratelimitheader

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

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
	s := Parse(&Input{Status: 429, Header: manyMembers(maxMembers)})
	assert.Equal(t, Signal{Throttled: true, Remaining: 1, HasRemaining: true,
		Reset: 10 * time.Second, Limit: maxMembers + 1, Period: time.Minute}, s)
	s = Parse(&Input{Status: 429, Header: manyMembers(50000)})
	assert.Equal(t, Signal{Throttled: true}, s, "a field of 50,000 members is ignored")
}

// BenchmarkManyRateLimitMembers measures a response whose RateLimit and
// RateLimit-Policy fields hold n members each.
func BenchmarkManyRateLimitMembers(b *testing.B) {
	for _, n := range []int{10, maxMembers, 50000} {
		h := manyMembers(n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				Parse(&Input{Status: 429, Header: h})
			}
		})
	}
}
