package headway

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// brokenBody gives its data, then fails as a reset connection does.
type brokenBody struct {
	r      io.Reader
	closed bool
}

func newBrokenBody(n int) *brokenBody {
	return &brokenBody{r: bytes.NewReader(bytes.Repeat([]byte("x"), n))}
}

func (b *brokenBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, syscall.ECONNRESET
	}
	return n, err
}

func (b *brokenBody) Close() error { b.closed = true; return nil }

// A response body that breaks reads as broken, not as a clean end, when
// headway looked into it first (issue 9, item 3).
func TestABrokenResponseBodyReportsItsError(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		header http.Header
	}{
		{"429", 429, hdr("Retry-After", "1")},
		{"400 with a limit", 400, hdr("X-RateLimit-Remaining", "5")},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := newBrokenBody(100)
			base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: c.status, Header: c.header, Body: body, Request: req}, nil
			})
			tr := New(base, WithRetry(RetryOptions{MaxAttempts: 1}))
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
			require.NoError(t, err)
			data, err := io.ReadAll(resp.Body)
			assert.Len(t, data, 100)
			assert.ErrorIs(t, err, syscall.ECONNRESET)
			resp.Body.Close()
			assert.True(t, body.closed)
		})
	}
}

// A throttled response kept while its retry waits keeps its error too.
func TestABufferedBrokenBodyReportsItsError(t *testing.T) {
	body := newBrokenBody(100)
	resp := buffer(&http.Response{Body: body}, maxBufferedThrottle)
	require.NotNil(t, resp)
	assert.True(t, body.closed)
	data, err := io.ReadAll(resp.Body)
	assert.Len(t, data, 100)
	assert.ErrorIs(t, err, syscall.ECONNRESET)

	// A whole body reads to a clean end.
	resp = buffer(&http.Response{Body: io.NopCloser(strings.NewReader("ok"))}, maxBufferedThrottle)
	data, err = io.ReadAll(resp.Body)
	assert.Equal(t, "ok", string(data))
	assert.NoError(t, err)
}
