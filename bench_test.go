package headway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

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
		// More keys than the sweep keeps: each of the 32 shards drops its
		// idle keys once it holds 64 (see keyTable), and a key comes back
		// after some 300 others of its shard, so every request makes its
		// key (and its host) anew, as with many hosts, or keys by path
		// whose paths hold IDs. The x/time/rate wrapper never drops a
		// limiter: it finds each in its map.
		{"churn", 10_000, false},
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

// lazyBody is a request body of n zero bytes, made as they are read, with
// no GetBody: what a body streamed from a file or a pipe costs its caller.
type lazyBody struct{ n int64 }

func (b *lazyBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	m := int(min(int64(len(p)), b.n))
	clear(p[:m])
	b.n -= int64(m)
	return m, nil
}

func (b *lazyBody) Close() error { return nil }

// BenchmarkQueuedBodyHeap measures the heap that 500 POSTs of 1 MiB each,
// with no GetBody, hold while they wait in their key's queue: the bytes of
// a body are read (to be sent again if need be) only when it leaves.
func BenchmarkQueuedBodyHeap(b *testing.B) {
	const queued, size = 500, 1 << 20
	var perReq float64
	for range b.N {
		tr := New(newNopRT(), WithLimit(Every(time.Hour)), WithQueue(QueueOptions{MaxLen: queued}))
		ctx, cancel := context.WithCancel(context.Background())
		first, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
		if _, err := tr.RoundTrip(first); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var wg sync.WaitGroup
		for range queued {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/", &lazyBody{n: size})
			wg.Go(func() { tr.RoundTrip(req) })
		}
		for tr.queued() < queued {
			time.Sleep(time.Millisecond)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perReq = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / queued
		cancel()
		wg.Wait()
	}
	b.ReportMetric(perReq, "heap-B/queued")
}
