package headway_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
)

// bare503 rejects with a 503 that names no delay: nginx's limit_req, by
// default, and servers behind it.
type bare503 struct{}

func (bare503) Header(http.Header, fakeserver.State) {}
func (bare503) Reject(http.Header, fakeserver.State) fakeserver.Rejection {
	return fakeserver.Rejection{Status: http.StatusServiceUnavailable}
}

// A server that answers a flood with 503s and no delay looks, to each
// flood, like a host gone down: an outage that its first probe ends. The
// queue held meanwhile left at once, all of it, and met a flood of 503s
// again: 400 requests from 32 workers, against a bucket of 20 a second,
// met 3844-4044 of them. Let go at a ramp, they meet 1053-1629.
func TestAFloodOf503sIsLetGoAtARampAfterItsOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := fakeserver.Config{Limit: 20, Burst: 10, Dialect: bare503{}, Faults: fakeserver.Faults{Latency: 20 * time.Millisecond}}
		srv := fakeserver.New(cfg)
		sh := fakeserver.Shape{Name: "503", Config: cfg, Rate: 20, Burst: 10}
		r := runShape(t, sh, srv, srv.Transport(), "http://api.test", 400, 32)
		t.Logf("efficiency %.3f, %d 503s", r.efficiency, r.throttled)
		if r.throttled > 2500 {
			t.Errorf("%d 503s for 400 requests: the held queue went at once after each outage", r.throttled)
		}
		if r.efficiency < 0.85 {
			t.Errorf("efficiency %.3f, want 0.85 at least", r.efficiency)
		}
	})
}

// 503s at random, among answers, end their outages with the answers
// beside them: no ramp holds the key after them. 2000 requests from 32
// workers, 5 % of them failing, take 2.16 s on average over 12 seeds
// without the ramp, 2.22 s with it, 1.24 s with no failure.
func TestRandom503sAreNotRamped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := fakeserver.Config{Limit: 1_000_000, Burst: 1_000_000,
			Faults: fakeserver.Faults{Latency: 20 * time.Millisecond, ErrorRate: 0.05, ErrorStatus: http.StatusServiceUnavailable, Seed: 3}}
		srv := fakeserver.New(cfg)
		sh := fakeserver.Shape{Name: "random", Config: cfg, Rate: 1e6, Burst: 1_000_000}
		r := runShape(t, sh, srv, srv.Transport(), "http://api.test", 2000, 32)
		t.Logf("%v for 2000 requests, %d failed", r.elapsed, srv.Stats().Errors)
		if r.elapsed > 3*time.Second {
			t.Errorf("2000 requests took %v, want 3 s at most", r.elapsed)
		}
	})
}
