package headway

import (
	"bytes"
	"io"
	"net/http"
)

const (
	// maxPeek bounds the prefix of an error response's body that signal
	// parsing reads (Discord's retry_after, OpenAI's insufficient_quota).
	maxPeek = 4 << 10
	// maxBufferedThrottle bounds the response (a throttle, a 5xx) kept in
	// memory while its request waits to be sent again; a larger one goes
	// back to the caller instead, unretried.
	maxBufferedThrottle = 64 << 10
)

// peek returns up to n bytes from the start of resp's body, and leaves the
// body whole for the caller.
func peek(resp *http.Response, n int) []byte {
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	buf := make([]byte, n)
	m, err := io.ReadFull(resp.Body, buf)
	buf = buf[:m]
	switch err {
	case nil:
		resp.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(buf), resp.Body), Closer: resp.Body}
	case io.EOF, io.ErrUnexpectedEOF: // the whole body is read: no need to keep the original
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(buf))
	default: // a broken body: the caller reads what came, then the error
		resp.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(buf), errReader{err}), Closer: resp.Body}
	}
	return buf
}

type peekedBody struct {
	io.Reader
	io.Closer
}

// errReader fails every read with err: the end of a body that broke.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// buffer reads resp's body into memory, closes the original and returns
// resp with the copy as its body; or, when the body is larger than limit,
// nil, and resp is left as it was, readable from the start.
func buffer(resp *http.Response, limit int64) *http.Response {
	if resp.Body == nil || resp.Body == http.NoBody {
		return resp
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if int64(len(data)) > limit {
		resp.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(data), resp.Body), Closer: resp.Body}
		return nil
	}
	resp.Body.Close()
	if err != nil { // a broken body: the caller reads what came, then the error
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(data), errReader{err}))
		return resp
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp
}
