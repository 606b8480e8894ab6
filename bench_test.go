package headway

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"golang.org/x/time/rate"
)

// nopRT answers every request with the same response and allocates
// nothing, so a benchmark measures only what wraps it.
type nopRT struct{ resp *http.Response }

func (n nopRT) RoundTrip(*http.Request) (*http.Response, error) { return n.resp, nil }

func newNopRT() nopRT {
	return nopRT{resp: &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}}
}

// freshRT answers every request with a new response: one allocation.
type freshRT struct{}

func (freshRT) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

// rateRT is the minimal rate-limited RoundTripper a user would write with
// golang.org/x/time/rate: Wait, then the base.
type rateRT struct {
	lim  *rate.Limiter
	base http.RoundTripper
}

func (r rateRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := r.lim.Wait(req.Context()); err != nil {
		return nil, err
	}
	return r.base.RoundTrip(req)
}

// rateRTPerKey is the same with one limiter per host, in a map under a
// mutex, as a user would write it.
type rateRTPerKey struct {
	mu   sync.Mutex
	lims map[string]*rate.Limiter
	base http.RoundTripper
}

func (r *rateRTPerKey) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	lim := r.lims[req.URL.Host]
	if lim == nil {
		lim = rate.NewLimiter(1e9, 1000)
		r.lims[req.URL.Host] = lim
	}
	r.mu.Unlock()
	if err := lim.Wait(req.Context()); err != nil {
		return nil, err
	}
	return r.base.RoundTrip(req)
}

func benchRequests(b *testing.B, keys int) []*http.Request {
	reqs := make([]*http.Request, keys)
	for i := range reqs {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, fmt.Sprintf("http://host%d.test/path", i), nil)
		if err != nil {
			b.Fatal(err)
		}
		reqs[i] = req
	}
	return reqs
}

func benchRT(b *testing.B, tr http.RoundTripper, keys int, parallel bool) {
	reqs := benchRequests(b, keys)
	b.ReportAllocs()
	b.ResetTimer()
	if !parallel {
		for i := 0; b.Loop(); i++ {
			resp, err := tr.RoundTrip(reqs[i%keys])
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			resp, err := tr.RoundTrip(reqs[i%keys])
			if err != nil {
				b.Error(err)
				return
			}
			resp.Body.Close()
		}
	})
}

// BenchmarkOverhead measures what a Transport adds to a request whose key is
// far below its limit, beside the x/time/rate wrapper a user would write.
func BenchmarkOverhead(b *testing.B) {
	far := PerSecond(1_000_000_000).WithBurst(1000)
	for _, c := range []struct {
		name     string
		keys     int
		parallel bool
	}{
		{"1key", 1, false},
		{"1000keys", 1000, false},
		{"1key/parallel", 1, true},
		{"1000keys/parallel", 1000, true},
	} {
		b.Run("headway/"+c.name, func(b *testing.B) {
			benchRT(b, New(newNopRT(), WithLimit(far)), c.keys, c.parallel)
		})
		b.Run("xtimerate/"+c.name, func(b *testing.B) {
			var tr http.RoundTripper = rateRT{lim: rate.NewLimiter(1e9, 1000), base: newNopRT()}
			if c.keys > 1 {
				tr = &rateRTPerKey{lims: map[string]*rate.Limiter{}, base: newNopRT()}
			}
			benchRT(b, tr, c.keys, c.parallel)
		})
	}
	// With a bound on requests in flight the response body is wrapped to
	// release the slot; freshRT's own allocation is one of those counted.
	b.Run("headway/1key/maxinflight", func(b *testing.B) {
		benchRT(b, New(freshRT{}, WithLimit(far), WithMaxInFlight(8)), 1, false)
	})
}
