package headway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/headway-go/headway/fakeserver"
	"github.com/headway-go/headway/internal/metrictest"
)

// metricsView is one collection of a metrictest.Provider, with look-ups
// by name.
type metricsView struct {
	t  testing.TB
	ms map[string]metrictest.Metric
}

func collectMetrics(t testing.TB, mp *metrictest.Provider) metricsView {
	t.Helper()
	v := metricsView{t: t, ms: map[string]metrictest.Metric{}}
	for _, m := range mp.Collect(context.Background()) {
		if m.Scope != meterName {
			t.Errorf("scope %q, want %q", m.Scope, meterName)
		}
		v.ms[m.Name] = m
	}
	return v
}

// matches reports whether set holds every one of kv.
func matches(set attribute.Set, kv []attribute.KeyValue) bool {
	for _, want := range kv {
		if got, ok := set.Value(want.Key); !ok || got != want.Value {
			return false
		}
	}
	return true
}

// count sums the points of the int64 counter or gauge name that carry kv.
func (v metricsView) count(name string, kv ...attribute.KeyValue) int64 {
	m, ok := v.ms[name]
	if !ok {
		return 0
	}
	if m.Kind == metrictest.Histogram {
		v.t.Errorf("%s is a histogram", name)
	}
	var n int64
	for _, p := range m.Points {
		if matches(p.Attributes, kv) {
			n += int64(p.Value)
		}
	}
	return n
}

// gauge returns the float64 gauge name without attributes, and whether
// it has a point.
func (v metricsView) gauge(name string) (float64, bool) {
	m := v.ms[name]
	if m.Kind != metrictest.Gauge || len(m.Points) == 0 {
		return 0, false
	}
	return m.Points[0].Value, true
}

// waits returns the number and sum of the queue-wait histogram's values.
func (v metricsView) waits() (uint64, float64) {
	var n uint64
	var sum float64
	for _, p := range v.ms["headway.queue.wait"].Points {
		n += p.Count
		sum += p.Value
	}
	return n, sum
}

// attrKeys returns every attribute key of every point.
func (v metricsView) attrKeys() map[attribute.Key]bool {
	keys := map[attribute.Key]bool{}
	for _, m := range v.ms {
		for _, p := range m.Points {
			for _, kv := range p.Attributes.ToSlice() {
				keys[kv.Key] = true
			}
		}
	}
	return keys
}

func fetch(t testing.TB, tr http.RoundTripper, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// scriptedRun is a run against the fake server, in virtual time:
//
//   - 8 GETs in a row to api.test, unlimited on the client, against a
//     server of 10 a second in bursts of 5: the sixth is throttled with a
//     Retry-After, pauses the key and is sent again after the pause; the
//     key's pace then comes from the throttles;
//   - 10 s later, 3 GETs at once to slow.test, limited to one a second with
//     a queue of one: the first leaves, the second waits a second in the
//     queue, the third finds the queue full.
//
// It returns what the server saw, and the metrics collected while the
// second request to slow.test waited.
type scriptResult struct {
	admitted, rejected int64
	during             metricsView
}

func scriptedRun(t *testing.T, mp *metrictest.Provider, opts ...Option) (*Transport, scriptResult) {
	srv := fakeserver.New(fakeserver.Config{Limit: 10, Window: time.Second, Burst: 5})
	opts = append([]Option{
		WithHostLimit("slow.test", Every(time.Second)),
		WithQueue(QueueOptions{MaxLen: 1}),
	}, opts...)
	tr := New(srv.Transport(), opts...)
	for range 8 {
		resp, err := fetch(t, tr, "http://api.test/items?token=q-secret")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("api.test: %v %v", resp, err)
		}
	}
	time.Sleep(10 * time.Second)

	var res scriptResult
	if _, err := fetch(t, tr, "http://slow.test/a"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := fetch(t, tr, "http://slow.test/b"); err != nil {
			t.Error(err)
		}
	})
	synctest.Wait() // b waits in the queue
	if mp != nil {
		res.during = collectMetrics(t, mp)
	}
	if _, err := fetch(t, tr, "http://slow.test/c"); !errors.Is(err, ErrQueueFull) {
		t.Errorf("c: %v, want ErrQueueFull", err)
	}
	wg.Wait()
	st := srv.Stats()
	res.admitted, res.rejected = st.Admitted, st.Rejected
	return tr, res
}

func TestMetricsOfAScriptedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp := metrictest.NewProvider()
		var hc hookCounts
		_, res := scriptedRun(t, mp, WithMeterProvider(mp), hc.option())
		m := collectMetrics(t, mp)

		throttled := res.rejected
		n, sum := m.waits()
		t.Logf("server admitted %d, throttled %d; %d waits summing to %.3fs", res.admitted, throttled, n, sum)
		if throttled < 1 {
			t.Fatalf("the server throttled nothing: the script no longer tests throttles")
		}
		if res.admitted != 10 {
			t.Errorf("server admitted %d, want 10", res.admitted)
		}
		sent := res.admitted + res.rejected
		outcome := func(o string) int64 { return m.count("headway.requests", attrOutcome.String(o)) }
		if got := outcome("sent"); got != sent {
			t.Errorf("sent %d, want %d", got, sent)
		}
		if got := outcome("throttled"); got != throttled {
			t.Errorf("throttled %d, want %d", got, throttled)
		}
		if got := outcome("retried"); got != throttled {
			t.Errorf("retried %d, want %d", got, throttled)
		}
		if got := outcome("error"); got != 0 {
			t.Errorf("error %d, want 0", got)
		}
		if got := outcome("rejected"); got != 1 {
			t.Errorf("rejected %d, want 1", got)
		}
		if got := m.count("headway.requests", attrReason.String(reasonQueueFull)); got != 1 {
			t.Errorf("queue_full %d, want 1", got)
		}
		if th, re := hc.throttled.Load(), hc.retries.Load(); th != throttled || re != throttled {
			t.Errorf("hooks saw %d throttled and %d retried, want %d of each", th, re, throttled)
		}
		if got := m.count("headway.pauses", attrScope.String("key")); got != throttled {
			t.Errorf("pauses %d, want %d", got, throttled)
		}

		// Every attempt sent waited in the queue, if only for nothing: b
		// for a second, the throttled requests' retries for their pause.
		if int64(n) != sent {
			t.Errorf("queue.wait has %d values, want %d", n, sent)
		}
		if sum < float64(throttled)+1 {
			t.Errorf("queue.wait sums to %.3fs, want at least %ds", sum, throttled+1)
		}

		// The gauges while b waited: one request queued, two keys, a pace
		// from slow.test's limit and api.test's throttles, and a limit
		// learned from the throttles.
		if got := res.during.count("headway.queue.length"); got != 1 {
			t.Errorf("queue.length %d while b waited, want 1", got)
		}
		if got := res.during.count("headway.keys"); got != 2 {
			t.Errorf("keys %d, want 2", got)
		}
		if p, ok := res.during.gauge("headway.pace"); !ok || p <= 1 {
			t.Errorf("pace %v (%v), want above slow.test's 1/s", p, ok)
		}
		if l, ok := res.during.gauge("headway.learned_limit"); !ok || l <= 0 {
			t.Errorf("learned_limit %v (%v), want a rate", l, ok)
		}
		if got := m.count("headway.queue.length"); got != 0 {
			t.Errorf("queue.length %d after the run, want 0", got)
		}

		// Only bounded attributes by default.
		for k := range m.attrKeys() {
			switch k {
			case attrOutcome, attrReason, attrScope:
			default:
				t.Errorf("attribute %q by default", k)
			}
		}
	})
}

func TestMetricKeysAndHostsAreOptIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp := metrictest.NewProvider()
		scriptedRun(t, mp, WithMeterProvider(mp), WithMetricKeys(true), WithMetricHosts(true),
			WithKey(KeyByHeader("Authorization")))
		m := collectMetrics(t, mp)
		keys := m.attrKeys()
		if !keys[attrKey] || !keys[attrHost] {
			t.Errorf("attributes %v, want %s and %s", keys, attrKey, attrHost)
		}
		slow := keyID("slow.test\x00")
		if got := m.count("headway.requests", attrOutcome.String("sent"), attrKey.String(slow), attrHost.String("slow.test")); got != 2 {
			t.Errorf("sent on slow.test: %d, want 2", got)
		}
		if got := m.count("headway.requests", attrReason.String(reasonQueueFull), attrKey.String(slow)); got != 1 {
			t.Errorf("queue_full on slow.test: %d, want 1", got)
		}
	})
}

// TestBreakerMetricsAndHooks opens a key's breaker with failures and
// checks the state-change counter, the state gauge and the hook, which
// calls back into the Transport on the same key.
func TestBreakerMetricsAndHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp := metrictest.NewProvider()
		stub := &stubRT{status: http.StatusInternalServerError}
		var (
			tr     *Transport
			events []BreakerEvent
			legacy []string
		)
		tr = New(stub, WithMeterProvider(mp),
			WithRetry(RetryOptions{MaxAttempts: 1}),
			WithBreaker(BreakerSettings{
				ConsecutiveFailures: 2,
				OnStateChange:       func(key string, _, _ BreakerState) { legacy = append(legacy, key) },
			}),
			WithHooks(Hooks{OnBreakerChange: func(e BreakerEvent) {
				events = append(events, e)
				if e.To == BreakerOpen {
					// Outside every lock: this request fails at once.
					if _, err := fetch(t, tr, "http://api.test/again"); !errors.Is(err, ErrCircuitOpen) {
						t.Errorf("from the hook: %v, want ErrCircuitOpen", err)
					}
				}
			}}))
		for range 3 {
			fetch(t, tr, "http://api.test/x")
		}
		if len(events) != 1 || events[0].From != BreakerClosed || events[0].To != BreakerOpen ||
			events[0].Key != "api.test" || events[0].Host != "api.test" {
			t.Errorf("events %+v, want one closed to open of api.test", events)
		}
		if len(legacy) != 1 || legacy[0] != "api.test" {
			t.Errorf("OnStateChange got %v", legacy)
		}
		m := collectMetrics(t, mp)
		if got := m.count("headway.breaker.changes", attrFrom.String("closed"), attrTo.String("open")); got != 1 {
			t.Errorf("changes closed to open: %d, want 1", got)
		}
		if got := m.count("headway.breakers", attrState.String("open")); got != 1 {
			t.Errorf("open breakers: %d, want 1", got)
		}
		if got := m.count("headway.requests", attrReason.String(reasonCircuitOpen)); got != 2 {
			t.Errorf("circuit_open: %d, want 2 (the third request and the hook's)", got)
		}
	})
}

// TestHooksRunOutsideLocks checks the throttle, pause and retry hooks of a
// throttled request: they are called in that order, and the throttle hook
// sends a request on the same key without a deadlock. That request spends
// the quota the retry waited for, so the retry is throttled again: only
// the first calls are checked.
func TestHooksRunOutsideLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{Limit: 1, Window: time.Second, Burst: 1})
		var (
			tr     *Transport
			mu     sync.Mutex
			order  []string
			nested bool
		)
		// note records a hook's call and returns its place in order.
		note := func(s string) int {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, s)
			return len(order) - 1
		}
		call := func() {
			mu.Lock()
			again := !nested
			nested = true
			mu.Unlock()
			if again {
				// The key is paused: this waits out the pause, and would
				// deadlock if the hook held the key's lock.
				if _, err := fetch(t, tr, "http://api.test/from-hook"); err != nil {
					t.Error(err)
				}
			}
		}
		tr = New(srv.Transport(), WithLimit(PerSecond(100).WithBurst(2)), WithHooks(Hooks{
			OnThrottle: func(e ThrottleEvent) {
				if note("throttle") == 0 && (e.Status != http.StatusTooManyRequests || e.Wait != time.Second || e.Attempt != 1 || e.Key != "api.test") {
					t.Errorf("throttle event %+v", e)
				}
				call()
			},
			OnPause: func(e PauseEvent) {
				if note("pause") == 1 && (e.Wait != time.Second || e.Global) {
					t.Errorf("pause event %+v", e)
				}
			},
			OnRetry: func(e RetryEvent) {
				if note("retry") == 2 && (e.Attempt != 2 || e.Status != http.StatusTooManyRequests || e.Delay != 0 || e.Err != nil) {
					t.Errorf("retry event %+v", e)
				}
			},
		}))
		fetch(t, tr, "http://api.test/1")
		if resp, err := fetch(t, tr, "http://api.test/2"); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("2: %v %v", resp, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(order) < 3 || order[0] != "throttle" || order[1] != "pause" || order[2] != "retry" {
			t.Errorf("hooks called %v, want throttle, pause, retry first", order)
		}
	})
}

// TestNoObserverAllocatesNothing guards the fast path: without metrics,
// logger or hooks, a request far below its limit allocates nothing.
func TestNoObserverAllocatesNothing(t *testing.T) {
	tr := New(newNopRT(), WithLimit(PerSecond(1_000_000_000).WithBurst(1000)))
	if tr.obs != nil {
		t.Fatal("an observer without options")
	}
	req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
	if n := testing.AllocsPerRun(1000, func() {
		resp, _ := tr.RoundTrip(req)
		resp.Body.Close()
	}); n != 0 {
		t.Errorf("%v allocations a request, want 0", n)
	}
}
