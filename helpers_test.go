package headway

import (
	"errors"
	"flag"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Tests check that acquire's fast path agrees with its general path;
	// benchmarks measure the fast path alone.
	flag.Parse()
	verifyRare = flag.Lookup("test.bench").Value.String() == ""
	goleak.VerifyTestMain(m)
}

// stubRT is a base RoundTripper that answers every request at once and
// records when each one was sent.
type stubRT struct {
	mu      sync.Mutex
	sent    []time.Time
	byKey   map[string]int
	err     error // returned instead of a response when set
	status  int
	closes  atomic.Int64 // response bodies closed
	active  atomic.Int64 // sent and body not yet closed
	peak    atomic.Int64 // most active at once
	onRound func(*http.Request)
}

func (s *stubRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	// A request is active from the moment it is sent until its response
	// body is closed: what the in-flight bound counts.
	a := s.active.Add(1)
	for p := s.peak.Load(); a > p && !s.peak.CompareAndSwap(p, a); p = s.peak.Load() {
	}
	s.mu.Lock()
	s.sent = append(s.sent, time.Now())
	if s.byKey == nil {
		s.byKey = make(map[string]int)
	}
	s.byKey[req.URL.Host]++
	s.mu.Unlock()
	if s.onRound != nil {
		s.onRound(req)
	}
	if s.err != nil {
		s.active.Add(-1)
		return nil, s.err
	}
	status := s.status
	if status == 0 {
		status = http.StatusOK
	}
	return &http.Response{
		StatusCode: status,
		Header:     http.Header{},
		Body:       &stubBody{Reader: strings.NewReader("ok"), s: s},
		Request:    req,
	}, nil
}

func (s *stubRT) times() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.sent...)
}

func (s *stubRT) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

type stubBody struct {
	*strings.Reader
	s      *stubRT
	done   atomic.Bool // read to the end or closed
	closed atomic.Bool
}

func (b *stubBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err != nil {
		b.finish()
	}
	return n, err
}

func (b *stubBody) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.s.closes.Add(1)
	}
	b.finish()
	return nil
}

// finish ends the request: what the in-flight bound counts ends when the
// body is read to the end or closed, whichever comes first.
func (b *stubBody) finish() {
	if b.done.CompareAndSwap(false, true) {
		b.s.active.Add(-1)
	}
}

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closes atomic.Int64
}

func (c *closeCounter) Close() error {
	c.closes.Add(1)
	return nil
}

func newBodyReq(t testing.TB, url string) (*http.Request, *closeCounter) {
	body := &closeCounter{Reader: strings.NewReader("payload")}
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req, body
}

func mustReq(t testing.TB, url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// drain reads and closes a response body.
func drain(resp *http.Response) {
	if resp != nil && resp.Body != nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

var errBase = errors.New("base failed")

// fanOut calls do n times, from g goroutines at once.
func fanOut(n, g int, do func()) {
	var wg sync.WaitGroup
	jobs := make(chan struct{})
	for range g {
		wg.Go(func() {
			for range jobs {
				do()
			}
		})
	}
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
}

// sendAll sends n GET requests to url through tr from g goroutines and
// fails the test on any error.
func sendAll(t *testing.T, tr http.RoundTripper, url string, n, g int) {
	t.Helper()
	fanOut(n, g, func() {
		resp, err := tr.RoundTrip(mustReq(t, url))
		if assert.NoError(t, err) {
			drain(resp)
		}
	})
}

// sendAllOK sends n GETs from g goroutines, each until it gets a 200.
func sendAllOK(t *testing.T, tr http.RoundTripper, url string, n, g int) {
	fanOut(n, g, func() {
		for {
			resp, err := tr.RoundTrip(mustReq(t, url))
			if !assert.NoError(t, err) {
				return
			}
			drain(resp)
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	})
}

// queued returns the requests waiting in every queue of t.
func (t *Transport) queued() int64 {
	var n int64
	for i := range t.keys.shards {
		s := &t.keys.shards[i]
		s.mu.RLock()
		for _, k := range s.m {
			k.mu.Lock()
			n += k.queue.n
			k.mu.Unlock()
		}
		s.mu.RUnlock()
	}
	return n
}

// hookCounts counts the throttled responses and the retries a Transport
// reports through its hooks.
type hookCounts struct{ throttled, retries atomic.Int64 }

// option returns the WithHooks option that counts into c.
func (c *hookCounts) option() Option {
	return WithHooks(Hooks{
		OnThrottle: func(ThrottleEvent) { c.throttled.Add(1) },
		OnRetry:    func(RetryEvent) { c.retries.Add(1) },
	})
}
