package headway

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingBody is a request body that counts its reads and closes.
type countingBody struct {
	r      io.Reader
	reads  atomic.Int64
	closes atomic.Int64
	err    error // returned by Read once r is exhausted, in place of EOF
}

func (b *countingBody) Read(p []byte) (int, error) {
	b.reads.Add(1)
	n, err := b.r.Read(p)
	if err == io.EOF && b.err != nil {
		err = b.err
	}
	return n, err
}

func (b *countingBody) Close() error {
	b.closes.Add(1)
	return nil
}

// newUnknownLenReq returns a POST whose body has no GetBody and an unknown
// length, as a request built around a pipe or a file would.
func newUnknownLenReq(t *testing.T, payload string) (*http.Request, *countingBody) {
	t.Helper()
	body := &countingBody{r: strings.NewReader(payload)}
	req, err := http.NewRequest(http.MethodPost, "http://api.test/x", body)
	require.NoError(t, err)
	require.Nil(t, req.GetBody)
	require.Zero(t, req.ContentLength)
	req.Header.Set("X-Caller", "1")
	return req, body
}

// snapshot is what a test checks to prove a request was not modified.
type snapshot struct {
	body    io.ReadCloser
	getBody bool
	length  int64
	header  string
	url     string
}

func snap(req *http.Request) snapshot {
	return snapshot{req.Body, req.GetBody != nil, req.ContentLength, strings.Join(req.Header.Values("X-Caller"), ","), req.URL.String()}
}

// readAttempt reads an attempt's body to its end and closes it, as a base
// RoundTripper does.
func readAttempt(t *testing.T, r *http.Request) string {
	t.Helper()
	if r.Body == nil || r.Body == http.NoBody {
		return ""
	}
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	require.NoError(t, r.Body.Close())
	return string(b)
}

func TestReplayNoBody(t *testing.T) {
	req := mustReq(t, "http://api.test/x")
	before := snap(req)
	rp, err := newReplayer(req, 10)
	require.NoError(t, err)
	for range 3 {
		assert.True(t, rp.canReplay())
		a, err := rp.attempt()
		require.NoError(t, err)
		assert.NotSame(t, req, a)
		assert.Nil(t, a.Body)
		a.Header.Set("X-Caller", "changed")
	}
	rp.close()
	assert.Equal(t, before, snap(req))
}

func TestReplayGetBody(t *testing.T) {
	body := &countingBody{r: strings.NewReader("payload")}
	req, err := http.NewRequest(http.MethodPut, "http://api.test/x", body)
	require.NoError(t, err)
	req.ContentLength = 7
	var gets atomic.Int64
	req.GetBody = func() (io.ReadCloser, error) {
		gets.Add(1)
		return io.NopCloser(strings.NewReader("payload")), nil
	}
	before := snap(req)

	rp, err := newReplayer(req, 1)
	require.NoError(t, err)
	assert.Zero(t, body.reads.Load(), "a body with GetBody is not read ahead")
	for i := range 3 {
		require.True(t, rp.canReplay())
		a, err := rp.attempt()
		require.NoError(t, err)
		assert.Equal(t, "payload", readAttempt(t, a), "attempt %d", i+1)
		assert.Equal(t, int64(7), a.ContentLength)
		// A transport that closes twice still closes the caller's body once.
		a.Body.Close()
	}
	rp.close()
	assert.Equal(t, int64(2), gets.Load(), "the first attempt sends the caller's body")
	assert.Equal(t, int64(1), body.closes.Load())
	assert.Equal(t, before, snap(req))
}

func TestReplayGetBodyFails(t *testing.T) {
	body := &countingBody{r: strings.NewReader("payload")}
	req, err := http.NewRequest(http.MethodPut, "http://api.test/x", body)
	require.NoError(t, err)
	boom := errors.New("boom")
	req.GetBody = func() (io.ReadCloser, error) { return nil, boom }
	rp, err := newReplayer(req, 1)
	require.NoError(t, err)
	a, err := rp.attempt()
	require.NoError(t, err)
	readAttempt(t, a)
	_, err = rp.attempt()
	assert.ErrorIs(t, err, boom)
	rp.close()
	assert.Equal(t, int64(1), body.closes.Load())
}

func TestReplayNotSentClosesOnce(t *testing.T) {
	for _, payload := range []string{"small", strings.Repeat("x", 100)} {
		req, body := newUnknownLenReq(t, payload)
		rp, err := newReplayer(req, 10)
		require.NoError(t, err)
		rp.close()
		rp.close()
		assert.Equal(t, int64(1), body.closes.Load(), "len %d", len(payload))
	}
	// GetBody path, no attempt made.
	body := &countingBody{r: strings.NewReader("payload")}
	req, err := http.NewRequest(http.MethodPut, "http://api.test/x", body)
	require.NoError(t, err)
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("payload")), nil }
	rp, err := newReplayer(req, 10)
	require.NoError(t, err)
	rp.close()
	assert.Equal(t, int64(1), body.closes.Load())
}

func TestReplayBuffered(t *testing.T) {
	const payload = "0123456789"
	req, body := newUnknownLenReq(t, payload)
	before := snap(req)
	rp, err := newReplayer(req, int64(len(payload))) // exactly at the limit
	require.NoError(t, err)
	assert.Equal(t, int64(1), body.closes.Load(), "buffered: the caller's body is closed at once")
	for i := range 4 {
		require.True(t, rp.canReplay())
		a, err := rp.attempt()
		require.NoError(t, err)
		assert.Equal(t, int64(len(payload)), a.ContentLength, "the length is now known")
		require.NotNil(t, a.GetBody, "net/http may replay it too")
		assert.Equal(t, payload, readAttempt(t, a), "attempt %d sends identical bytes", i+1)
		again, err := a.GetBody()
		require.NoError(t, err)
		b, _ := io.ReadAll(again)
		assert.Equal(t, payload, string(b))
	}
	rp.close()
	assert.Equal(t, int64(1), body.closes.Load())
	assert.Equal(t, before, snap(req), "the caller's request is unchanged")
}

func TestReplayBufferedEmpty(t *testing.T) {
	req, body := newUnknownLenReq(t, "")
	rp, err := newReplayer(req, 10)
	require.NoError(t, err)
	a, err := rp.attempt()
	require.NoError(t, err)
	assert.Equal(t, http.NoBody, a.Body)
	assert.Zero(t, a.ContentLength)
	rp.close()
	assert.Equal(t, int64(1), body.closes.Load())
}

func TestReplayBufferedKeepsAStatedLength(t *testing.T) {
	req, _ := newUnknownLenReq(t, "abc")
	req.ContentLength = 5 // wrong: net/http must see it and complain
	rp, err := newReplayer(req, 10)
	require.NoError(t, err)
	a, err := rp.attempt()
	require.NoError(t, err)
	assert.Equal(t, int64(5), a.ContentLength)
	assert.Equal(t, "abc", readAttempt(t, a))
}

func TestReplayOverLimitSentOnce(t *testing.T) {
	payload := strings.Repeat("abcdefghij", 10)
	req, body := newUnknownLenReq(t, payload)
	before := snap(req)
	rp, err := newReplayer(req, 16)
	require.NoError(t, err)
	assert.Zero(t, body.closes.Load())
	require.True(t, rp.canReplay(), "it can be sent once")
	a, err := rp.attempt()
	require.NoError(t, err)
	assert.Nil(t, a.GetBody)
	assert.Equal(t, payload, readAttempt(t, a), "the read prefix and the rest, re-assembled")
	assert.False(t, rp.canReplay())
	_, err = rp.attempt()
	assert.ErrorIs(t, err, errNotReplayable)
	rp.close()
	assert.Equal(t, int64(1), body.closes.Load(), "closed by the transport, once")
	assert.Equal(t, before, snap(req))
}

func TestReplayKnownLengthOverLimitIsNotRead(t *testing.T) {
	payload := strings.Repeat("x", 100)
	req, body := newUnknownLenReq(t, payload)
	req.ContentLength = 100
	rp, err := newReplayer(req, 16)
	require.NoError(t, err)
	assert.Zero(t, body.reads.Load())
	a, err := rp.attempt()
	require.NoError(t, err)
	assert.Equal(t, payload, readAttempt(t, a))
	rp.close()
	assert.Equal(t, int64(1), body.closes.Load())
}

func TestReplayNegativeLimitNeverBuffers(t *testing.T) {
	req, body := newUnknownLenReq(t, "abc")
	rp, err := newReplayer(req, -1)
	require.NoError(t, err)
	assert.Zero(t, body.reads.Load())
	a, err := rp.attempt()
	require.NoError(t, err)
	assert.Equal(t, "abc", readAttempt(t, a))
	assert.False(t, rp.canReplay())
	rp.close()
	assert.Equal(t, int64(1), body.closes.Load())
}

func TestReplayReadErrorClosesBody(t *testing.T) {
	req, body := newUnknownLenReq(t, "abc")
	boom := errors.New("disk on fire")
	body.err = boom
	rp, err := newReplayer(req, 10)
	assert.Nil(t, rp)
	assert.ErrorIs(t, err, boom)
	assert.True(t, strings.HasPrefix(err.Error(), "headway: "))
	assert.Equal(t, int64(1), body.closes.Load())
}

// A queued request holds its body unread: it is buffered for replay only
// when the request leaves (issue 9, item 4).
func TestAQueuedRequestDoesNotBufferItsBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &adaptRT{script: func(int, *http.Request) (int, http.Header) { return 200, nil }}
		tr := New(rt, WithLimit(PerSecond(1)))
		get(t, tr, "http://api.test/first")
		req, body := newUnknownLenReq(t, strings.Repeat("x", 1000))
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := tr.RoundTrip(req)
			if assert.NoError(t, err) {
				drain(resp)
			}
		}()
		synctest.Wait()
		assert.Zero(t, body.reads.Load(), "the queued request's body was read")
		<-done
		assert.NotZero(t, body.reads.Load())
		assert.EqualValues(t, 1, body.closes.Load())
	})
}
