package ratelimitheader

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestJSONValue(t *testing.T) {
	for _, c := range []struct {
		body, key, want string
		isString, ok    bool
	}{
		{`{"retry_after":64.57,"global":false}`, "retry_after", "64.57", false, true},
		{`{"retry_after" : 5 }`, "retry_after", "5", false, true},
		{`{"global":true}`, "global", "true", false, true},
		{`{"error":{"type":"insufficient_quota"}}`, "type", "insufficient_quota", true, true},
		{`{"a":"x\"y"}`, "a", `x\"y`, true, true},
		{`{"msg":"the retry_after field","retry_after":2}`, "retry_after", "2", false, true},
		{`{"retry_after":64.5`, "retry_after", "", false, false}, // cut: the end of the value is unknown
		{`{"type":"insuff`, "type", "", false, false},
		{`{"retry_after":}`, "retry_after", "", false, false},
		{`{"x_retry_after":1}`, "retry_after", "", false, false},
		{`{"\"retry_after\"":1}`, "retry_after", "", false, false},
		{`aaaa0000`, "", "", false, false},
		{``, "a", "", false, false},
	} {
		v, isString, ok := jsonValue([]byte(c.body), c.key)
		assert.Equal(t, c.ok, ok, c.body)
		assert.Equal(t, c.want, string(v), c.body)
		assert.Equal(t, c.isString, isString, c.body)
	}
	assert.True(t, containsFold([]byte("API Rate Limit Exceeded"), "rate limit exceeded"))
	assert.False(t, containsFold([]byte("rate limi"), "rate limit"))
}

func TestJSONMembers(t *testing.T) {
	type member struct {
		key, val string
		isString bool
	}
	for _, c := range []struct {
		body string
		want []member
	}{
		{`{"a":1,"b":{"c":"x\"y","d":[1,"e",{"f":true}]},"g":null}`,
			[]member{{"a", "1", false}, {"c", `x\"y`, true}, {"f", "true", false}, {"g", "null", false}}},
		{`{"msg":"a \"k\": 1 inside","k":2}`, []member{{"msg", `a \"k\": 1 inside`, true}, {"k", "2", false}}},
		{`["k", 1, "v"]`, nil},
		{`{"k" : 5 }`, []member{{"k", "5", false}}},
		{`{"a":1,"b":2`, []member{{"a", "1", false}}}, // cut: the last value's end is unknown
		{`{"a":"unterminated`, nil},
		{`{"a":}`, nil},
		{`{"a":`, nil},
		{``, nil},
	} {
		var got []member
		jsonMembers([]byte(c.body), func(k, v []byte, isString bool) bool {
			got = append(got, member{string(k), string(v), isString})
			return true
		})
		assert.Equal(t, c.want, got, c.body)
	}
	n := 0
	jsonMembers([]byte(`{"a":1,"b":2,"c":3}`), func(_, _ []byte, _ bool) bool { n++; return n < 2 })
	assert.Equal(t, 2, n, "the walk stops when fn says so")
}

func TestDelayKind(t *testing.T) {
	for name, want := range map[string]int{
		"retry_after": delayBare, "retry-after": delayBare, "retryAfter": delayBare, "RETRY_AFTER": delayBare,
		"retry_in_seconds": delaySeconds, "retry-seconds": delaySeconds, "retry_after_seconds": delaySeconds,
		"retryAfterSecs": delaySeconds, "retry_after_ms": delayMillis, "retryAfterMs": delayMillis,
		"retry_after_milliseconds": delayMillis, "retry_in_ms": delayMillis, "msBeforeNext": delayMillis,
		"seconds_before_next": delaySeconds,
	} {
		k, ok := delayKind([]byte(name))
		assert.True(t, ok, name)
		assert.Equal(t, want, k, name)
	}
	for _, name := range []string{"retry", "retries", "retry_count", "retryable", "retry_in", "retry_after_minutes",
		"x_retry_after", "retry after", `retry\u005fafter`, "beforeNext", "hoursBeforeNext", "msBefore", "", "retry_after_ssssssssssssssssssssssssssss"} {
		_, ok := delayKind([]byte(name))
		assert.False(t, ok, name)
	}
}
