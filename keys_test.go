package headway

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// A key costs little memory until its server says something worth
// remembering: an unbounded number of keys stays cheap between sweeps.
func TestAKeyIsSmall(t *testing.T) {
	if size := unsafe.Sizeof(keyState{}); size > 1024 {
		t.Errorf("keyState is %d bytes", size)
	}
}

// A host is made with its first key, and again for each key whose host
// was dropped (many hosts, or keys evicted between sweeps): what only a
// few hosts use is made when one does. A ring of the resets of 8 keys
// held in place made each host 560 bytes, where it was 120, and each
// request of BenchmarkOverhead's churn allocated 1798 bytes, not 1334.
func TestAHostIsSmall(t *testing.T) {
	if size := unsafe.Sizeof(hostState{}); size > 192 {
		t.Errorf("hostState is %d bytes", size)
	}
}

// What a request of a key far below its limits reads or writes of the
// key (see keyState) lies on six cache lines: the first five the key
// takes, up to the end of out's stall, and the one that holds model's deps
// and window's taken and lastAt. With many keys in use, each line a
// request touches is likely out of the CPU's nearer caches. The lines are
// counted where the runtime puts a key: a keyState, over 512 bytes and
// with pointers, begins 8 bytes into its slot, after the runtime's header.
func TestAKeysHotFieldsAreFew(t *testing.T) {
	const line = 64
	k := new(keyState)
	keySink = k // on the heap, as newKey's
	defer func() { keySink = nil }()
	at := func(p unsafe.Pointer) uintptr { return uintptr(p) / line }
	first, last := at(unsafe.Pointer(k)), at(unsafe.Add(unsafe.Pointer(&k.out.stall), unsafe.Sizeof(k.out.stall)-1))
	if n := last - first + 1; n > 5 {
		t.Errorf("keyState's fields from env to out.stall lie on %d cache lines, not 5", n)
	}
	deps, lastAt := at(unsafe.Pointer(&k.model.deps)), at(unsafe.Add(unsafe.Pointer(&k.window.lastAt), unsafe.Sizeof(k.window.lastAt)-1))
	if deps != lastAt || deps != at(unsafe.Pointer(&k.window.taken)) {
		t.Errorf("model.deps and window.taken and lastAt are not on one cache line")
	}
}

var keySink *keyState

// A key whose request is in flight is not idle: a sweep must not drop it,
// or the pause its response names is lost (issue 9, item 1).
func TestASweepKeepsAKeyWithARequestInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		rt := &adaptRT{script: func(_ int, req *http.Request) (int, http.Header) {
			if req.URL.Path == "/a" {
				<-release
				return 429, hdr("Retry-After", "2")
			}
			return 200, nil
		}}
		tr := New(rt, WithKey(KeyByPath), WithRetry(RetryOptions{MaxAttempts: 1}))
		done := make(chan *http.Response)
		go func() { done <- get(t, tr, "http://api.test/a") }()
		synctest.Wait()
		for i := range 5000 {
			get(t, tr, fmt.Sprintf("http://api.test/k%d", i))
		}
		close(release)
		assert.Equal(t, 429, (<-done).StatusCode)
		throttledAt := time.Now()
		get(t, tr, "http://api.test/a")
		assert.Equal(t, 2*time.Second, time.Since(throttledAt), "the pause of the key in flight was lost")
	})
}

// A key whose breaker is open is not idle: a sweep must not drop it, or
// its next request goes to a server the breaker knows to be failing.
func TestASweepKeepsAKeyWithAnOpenBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &adaptRT{script: func(_ int, req *http.Request) (int, http.Header) {
			if req.URL.Path == "/a" {
				return 500, nil // a failure to the breaker; no outage state to keep the key
			}
			return 200, nil
		}}
		tr := New(rt, WithKey(KeyByPath), WithRetry(RetryOptions{MaxAttempts: 1, ProbeInterval: -1}),
			WithBreaker(BreakerSettings{ConsecutiveFailures: 1, Timeout: time.Hour}))
		assert.Equal(t, 500, get(t, tr, "http://api.test/a").StatusCode)
		time.Sleep(11 * time.Minute) // what the 500 taught is forgotten; the breaker stays open
		for i := range 5000 {
			get(t, tr, fmt.Sprintf("http://api.test/k%d", i))
		}
		_, err := tr.RoundTrip(mustReq(t, "http://api.test/a"))
		assert.ErrorIs(t, err, ErrCircuitOpen, "the open breaker was dropped")
	})
}

// globalOnceRT answers its first two requests with a global throttle whose
// wait is to the millisecond (Discord's), then 200 to every request.
type globalOnceRT struct{ n atomic.Int64 }

func (g *globalOnceRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	h := http.Header{}
	if g.n.Add(1) <= 2 {
		h.Set("X-RateLimit-Global", "true")
		h.Set("Retry-After", "1")
		h.Set("Content-Type", "application/json")
		return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h,
			Body: io.NopCloser(strings.NewReader(`{"retry_after": 0.357, "global": true}`)), Request: req}, nil
	}
	return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
}

// TestAGlobalThrottleDoesNotPinItsScopesKeys: two global throttles of a
// token a second apart, never followed by another, leave its scope's
// window half learned; once the last is long past, the keys of that token,
// idle, are dropped as the key table sweeps, as they are without the
// throttles: memory stays proportional to the keys in use (it held every
// key ever made before).
func TestAGlobalThrottleDoesNotPinItsScopesKeys(t *testing.T) {
	for _, throttle := range []bool{false, true} {
		t.Run(fmt.Sprint("throttle ", throttle), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &globalOnceRT{}
				if !throttle {
					base.n.Store(2)
				}
				tr := New(base, WithKey(KeyByPath), WithRetry(RetryOptions{MaxAttempts: 1}))
				get := func(path string) {
					req, err := http.NewRequest(http.MethodGet, "http://discord.test"+path, nil)
					if err != nil {
						t.Fatal(err)
					}
					req.Header.Set("Authorization", "Bot A")
					resp, err := tr.RoundTrip(req)
					if err != nil {
						t.Fatal(err)
					}
					drain(resp)
				}
				get("/first")
				time.Sleep(time.Second)
				get("/first")
				time.Sleep(2 * time.Second) // the pause is long over
				const n = 40000             // one a 50 ms: 2000 s
				for i := range n {
					get(fmt.Sprintf("/channels/%d", i))
					time.Sleep(50 * time.Millisecond)
				}
				// The keys of the last 10 minutes (12000) may be held, and
				// the table may grow to twice what it held after its last
				// sweep.
				held := tr.keys.len()
				t.Logf("%d keys held of %d", held, n)
				if held > 3*n/4 {
					t.Errorf("%d keys held of %d, idle, their token's last throttle long past", held, n)
				}
			})
		})
	}
}

// firstThrottledRT answers the first request of each path with a bare 429
// whose wait is to the millisecond (a retry_after in its body), and every
// other request with 200.
type firstThrottledRT struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (f *firstThrottledRT) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	first := !f.seen[req.URL.Path]
	f.seen[req.URL.Path] = true
	f.mu.Unlock()
	h := http.Header{}
	if first {
		h.Set("Content-Type", "application/json")
		return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h,
			Body: io.NopCloser(strings.NewReader(`{"retry_after": 0.357}`)), Request: req}, nil
	}
	return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
}

// TestAThrottleLongPastDoesNotPinItsKey: a key throttled once, with a wait
// to the millisecond that begins to teach it a window, and never again, is
// dropped as the key table sweeps once the throttle is long past (its cut
// pace is forgotten after 10 minutes): a key per path that each met one
// throttle does not keep memory growing with every path ever used (it held
// every key ever made before).
func TestAThrottleLongPastDoesNotPinItsKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(&firstThrottledRT{seen: map[string]bool{}}, WithKey(KeyByPath), WithRetry(RetryOptions{MaxAttempts: 1}))
		const n = 40000 // one a 50 ms: 2000 s
		for i := range n {
			req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://api.test/items/%d", i), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			drain(resp)
			time.Sleep(50 * time.Millisecond)
		}
		// The keys of the last 10 minutes (12000) are held, and the table
		// may grow to twice what it held after its last sweep.
		held := tr.keys.len()
		t.Logf("%d keys held of %d", held, n)
		if held > 3*n/4 {
			t.Errorf("%d keys held of %d, most of them throttled once long ago", held, n)
		}
	})
}

// TestKeysSpreadOverTheShards: keys that differ only in the middle (an ID
// in a path, the usual KeyByPath key) spread over every shard as evenly as
// keys that differ at their ends, so that no one lock or sweep serves them
// all.
func TestKeysSpreadOverTheShards(t *testing.T) {
	shapes := []string{
		"api.example.com/channels/%d/messages",
		"api.github.com/repos/owner/repo%d/issues",
		"host%d.test",
		"%d",
	}
	for _, shape := range shapes {
		kt := &keyTable{kh: newKeyHash()}
		var counts [keyShards]int
		for i := range 100 * keyShards {
			s := kt.shard(kt.hash(fmt.Sprintf(shape, i)))
			counts[(uintptr(unsafe.Pointer(s))-uintptr(unsafe.Pointer(&kt.shards[0])))/unsafe.Sizeof(kt.shards[0])]++
		}
		// 100 a shard on average; a uniform hash stays within 5 standard
		// deviations (10) of it.
		for i, n := range counts {
			assert.InDelta(t, 100, n, 50, "%q: shard %d holds %d of %d keys", shape, i, n, 100*keyShards)
		}
	}
}
