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
