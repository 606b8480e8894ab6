package headway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// errNotReplayable tells replayer.attempt's caller that the body was sent
// once and cannot be sent again; it never reaches a user when the retry
// decision checks canReplay first.
var errNotReplayable = errors.New("headway: request body cannot be replayed")

// replayMode is how a replayer gives each attempt its body.
type replayMode uint8

const (
	replayNoBody   replayMode = iota // no body: every attempt is a plain clone
	replayGetBody                    // the caller's body first, then GetBody
	replayBuffered                   // the body read into memory, then closed
	replayOnce                       // too large to buffer: sent once, never replayed
)

// replayer hands out the request of each attempt of one RoundTrip: a clone
// of the caller's request with a fresh body, so that the caller's request
// is never modified and every attempt sends the same bytes.
//
//   - No body (nil or http.NoBody): every attempt is a clone.
//   - GetBody set (http.NewRequest sets it for bytes, strings and their
//     readers): the first attempt sends the caller's body, later ones a
//     body from GetBody, as net/http does when it replays a request.
//   - Otherwise the body is read into memory, at most limit+1 bytes. When
//     it fits in limit, the caller's body is closed at once and each attempt
//     reads the buffered bytes (with GetBody and ContentLength set, so that
//     net/http may replay it too). When it does not fit, or ContentLength
//     already says it cannot, the request is sent once with the bytes read so
//     far followed by the rest of the caller's body, and never retried.
//     A negative limit never buffers.
//
// The caller's body is closed exactly once on every path: by the transport
// that was handed an attempt carrying it, or by close when none was. A
// request returned by attempt must be sent (the base RoundTripper closes its
// body) or have its body closed, like any request.
//
// A replayer is used by one RoundTrip at a time; it is not safe for
// concurrent use.
type replayer struct {
	req    *http.Request
	mode   replayMode
	orig   *onceCloser // the caller's body; nil without one
	handed bool        // orig went out in an attempt: its receiver closes it
	buf    []byte      // replayBuffered: the body; replayOnce: the prefix read
	n      int         // attempts handed out
}

// newReplayer prepares the attempts of req, reading its body into memory
// when it has to and may (see replayer). When reading the body fails, the
// body is closed and the error returned: the request cannot be sent.
func newReplayer(req *http.Request, limit int64) (*replayer, error) {
	rp := &replayer{req: req}
	if req.Body == nil || req.Body == http.NoBody {
		return rp, nil
	}
	rp.orig = &onceCloser{ReadCloser: req.Body}
	switch {
	case req.GetBody != nil:
		rp.mode = replayGetBody
		return rp, nil
	case limit < 0 || req.ContentLength > limit:
		rp.mode = replayOnce
		return rp, nil
	}
	size := limit + 1
	if req.ContentLength > 0 {
		size = req.ContentLength + 1 // read to EOF, no further
	}
	var b bytes.Buffer
	b.Grow(int(min(size, 64<<10)))
	_, err := b.ReadFrom(io.LimitReader(req.Body, size))
	rp.buf = b.Bytes()
	if err != nil {
		rp.orig.Close()
		return nil, fmt.Errorf("headway: reading request body to buffer it: %w", err)
	}
	if int64(len(rp.buf)) > limit {
		rp.mode = replayOnce
		return rp, nil
	}
	rp.mode = replayBuffered
	rp.orig.Close()
	return rp, nil
}

// canReplay reports whether another attempt can be made with the same body.
func (rp *replayer) canReplay() bool { return rp.mode != replayOnce || rp.n == 0 }

// attempt returns the request of the next attempt: a clone of the caller's
// request, on its context, with a body of its own. It fails with
// errNotReplayable when the body was sent once and cannot be sent again,
// or with GetBody's error.
func (rp *replayer) attempt() (*http.Request, error) {
	if !rp.canReplay() {
		return nil, errNotReplayable
	}
	r := rp.req.Clone(rp.req.Context())
	switch rp.mode {
	case replayGetBody:
		if !rp.handed {
			rp.handed = true
			r.Body = rp.orig
			break
		}
		body, err := rp.req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("headway: replaying request body: %w", err)
		}
		r.Body = body
	case replayBuffered:
		buf := rp.buf
		if r.ContentLength <= 0 {
			// Unknown until read: now it is known. A stated length is kept
			// as it is, so that net/http reports a body that belies it.
			r.ContentLength = int64(len(buf))
		}
		if r.ContentLength == 0 {
			r.Body, r.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
			break
		}
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
		r.Body, _ = r.GetBody()
	case replayOnce:
		rp.handed = true
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(rp.buf), rp.orig), rp.orig}
		rp.buf = nil
	}
	rp.n++
	return r, nil
}

// close closes the caller's body unless an attempt carried it away, in
// which case its receiver closes it. It is safe to call more than once.
func (rp *replayer) close() {
	if rp.orig != nil && !rp.handed {
		rp.orig.Close()
	}
}

// onceCloser closes its ReadCloser once, however many times it is closed.
type onceCloser struct {
	io.ReadCloser
	once sync.Once
	err  error
}

func (c *onceCloser) Close() error {
	c.once.Do(func() { c.err = c.ReadCloser.Close() })
	return c.err
}
