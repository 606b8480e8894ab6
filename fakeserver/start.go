package fakeserver

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
)

// Running is a Server listening on a loopback port, started by Start.
type Running struct {
	// URL is the base URL of the server, such as http://127.0.0.1:40123.
	URL string
	// Server is the running Server, for its Stats and its controls.
	Server *Server

	ts *httptest.Server
}

// Start starts a Server for cfg on a free port of 127.0.0.1, for tests,
// benchmarks and examples that want a real network round trip:
//
//	fs, err := fakeserver.Start(fakeserver.Config{Limit: 50, Burst: 10})
//	if err != nil { ... }
//	defer fs.Close()
//	resp, err := http.Get(fs.URL + "/items/1")
//
// The caller must call Close. Inside a testing/synctest bubble, use
// Server.Transport instead: the fake clock cannot advance while a goroutine
// waits on a real socket.
func Start(cfg Config) (*Running, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakeserver: %w", err)
	}
	s := New(cfg)
	ts := httptest.NewUnstartedServer(s)
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	return &Running{URL: ts.URL, Server: s, ts: ts}, nil
}

// Client returns an HTTP client for the running server, whose idle
// connections Close closes.
func (r *Running) Client() *http.Client { return r.ts.Client() }

// Close shuts the server down and waits until the requests in flight have
// been answered.
func (r *Running) Close() { r.ts.Close() }

// ErrConnReset is the error Server.Transport returns for a request whose
// connection the server resets (see Faults.ResetRate). It wraps
// syscall.ECONNRESET, as a real reset would.
var ErrConnReset = fmt.Errorf("fakeserver: connection reset by peer: %w", syscall.ECONNRESET)

// Transport returns an http.RoundTripper that serves requests with s in
// memory, without a network: each RoundTrip calls s.ServeHTTP in the
// caller's goroutine. It works inside a testing/synctest bubble, where a
// real socket would stop the fake clock. A reset connection is returned as
// ErrConnReset; a request whose context ends during the response's latency
// returns the context's error.
func (s *Server) Transport() http.RoundTripper { return transport{s} }

type transport struct{ s *Server }

func (t transport) RoundTrip(req *http.Request) (resp *http.Response, err error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	sreq := req.Clone(req.Context())
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	sreq.RequestURI = req.URL.RequestURI()
	if sreq.RemoteAddr == "" {
		sreq.RemoteAddr = "127.0.0.1:1"
	}
	rec := &recorder{ResponseRecorder: httptest.NewRecorder()}
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler { //nolint:errorlint // panic values are compared as is
				panic(v)
			}
			resp, err = nil, ErrConnReset
		}
	}()
	t.s.ServeHTTP(rec, sreq)
	if !rec.wrote {
		if err := req.Context().Err(); err != nil {
			return nil, err // the server gave up on the request
		}
	}
	resp = rec.Result()
	resp.Request = req
	return resp, nil
}

// recorder notes whether the handler wrote anything.
type recorder struct {
	*httptest.ResponseRecorder
	wrote bool
}

func (r *recorder) WriteHeader(code int) {
	r.wrote = true
	r.ResponseRecorder.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseRecorder.Write(b)
}
