package headway

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
	"github.com/stretchr/testify/assert"
)

// A rare throttle of a key with a configured limit costs the wait it
// states, and no more: after the pause the key goes back to its configured
// pace (issue 9, item 5).
func TestARareThrottleCostsOnlyItsStatedWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		rt := &adaptRT{script: func(int, *http.Request) (int, http.Header) {
			if i := n.Add(1); i == 1500 || i == 3500 {
				return 429, hdr("Retry-After", "1")
			}
			return 200, nil
		}}
		tr := New(rt, WithLimit(PerSecond(1000).WithBurst(10)))
		start := time.Now()
		sendAllOK(t, tr, "http://api.test/", 5000, 32)
		// 5,000 requests at 1,000/s, of which the first 10 leave at once,
		// and two pauses of 1 s.
		want := 4990*time.Millisecond + 2*time.Second
		assert.InDelta(t, want, time.Since(start), float64(50*time.Millisecond), "took %v", time.Since(start))
	})
}

// A configured limit above the server's is not trusted for long: throttles
// that keep coming lower the key's pace to what the server admits.
func TestAConfiguredLimitTooHighStillAdapts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{Limit: 50, Burst: 10})
		tr := New(srv.Transport(), WithLimit(PerSecond(100).WithBurst(10)))
		start := time.Now()
		sendAllOK(t, tr, "http://api.test/", 1500, 8)
		elapsed := time.Since(start)
		st := srv.Stats()
		t.Logf("%v, %+v", elapsed, st)
		// At the server's 50/s, 1,500 requests take 30 s; a key that only
		// paused 1 s on every throttle would spend far longer.
		assert.Less(t, elapsed, 40*time.Second)
		assert.Less(t, st.Rejected, int64(150), "throttled on one request in ten or more")
	})
}

// BenchmarkThrottleCost runs 1,000 requests a second for 10 s (real time,
// over loopback) against a fake server that admits 1,000/s with a burst of
// 10, from a key with the same limit and burst. Network and scheduling
// jitter bunch requests up now and then, and the server throttles one with
// Retry-After: 1. It reports the throughput lost beyond the waits the
// server stated, per pause: what a throttle costs more than it asked.
//
// The sub-benchmark server=2000 is the control: the same client against a
// server twice as fast, which never throttles it; its lost-ms is what the
// machine itself costs (a loaded machine cannot keep 1,000/s up), to be
// taken from the other's.
//
//	go test -run '^$' -bench ThrottleCost -benchtime 1x .
func BenchmarkThrottleCost(b *testing.B) {
	for _, server := range []int{1000, 2000} {
		b.Run(fmt.Sprintf("server=%d", server), func(b *testing.B) { throttleCost(b, server) })
	}
}

func throttleCost(b *testing.B, server int) {
	const rate, burst, span, workers = 1000, 10, 10 * time.Second, 32
	for range b.N {
		fs, err := fakeserver.Start(fakeserver.Config{Limit: server, Burst: burst * server / rate})
		if err != nil {
			b.Fatal(err)
		}
		base := &http.Transport{MaxIdleConnsPerHost: workers}
		var pz pauseLog
		tr := New(base, WithLimit(PerSecond(rate).WithBurst(burst)), WithHooks(Hooks{OnPause: pz.add}))
		var ok atomic.Int64
		start := time.Now()
		end := start.Add(span)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for time.Now().Before(end) {
					req, _ := http.NewRequest(http.MethodGet, fs.URL+"/items/1", nil)
					resp, err := tr.RoundTrip(req)
					if err != nil {
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						ok.Add(1)
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		base.CloseIdleConnections()
		fs.Close()
		st := fs.Server.Stats()
		// What the key could have sent in elapsed at its configured pace,
		// less what it did send, in seconds of its pace.
		lost := elapsed.Seconds() - float64(ok.Load()-burst)/rate
		paused, n := pz.union(start.Add(elapsed))
		b.ReportMetric(float64(ok.Load())/elapsed.Seconds(), "ok/s")
		b.ReportMetric(float64(st.Rejected), "throttled")
		b.ReportMetric(float64(n), "pauses")
		b.ReportMetric(paused.Seconds()*1000, "paused-ms")
		b.ReportMetric(lost*1000, "lost-ms")
		if n > 0 {
			b.ReportMetric((lost-paused.Seconds())*1000/float64(n), "excess-ms/pause")
		}
	}
}

// pauseLog records the pauses a Transport reports, to measure the time
// they cover together.
type pauseLog struct {
	mu sync.Mutex
	p  [][2]time.Time
}

func (l *pauseLog) add(e PauseEvent) {
	now := time.Now()
	l.mu.Lock()
	l.p = append(l.p, [2]time.Time{now, now.Add(e.Wait)})
	l.mu.Unlock()
}

// union returns the time before end that the pauses cover, and how many
// separate pauses (overlapping ones counted once) cover it.
func (l *pauseLog) union(end time.Time) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var total time.Duration
	var n int
	var cur [2]time.Time
	for i, p := range l.p { // in the order they came: by start
		if p[1].After(end) {
			p[1] = end
		}
		if i > 0 && !p[0].After(cur[1]) {
			if p[1].After(cur[1]) {
				cur[1] = p[1]
			}
			continue
		}
		if i > 0 {
			total += cur[1].Sub(cur[0])
		}
		cur, n = p, n+1
	}
	if n > 0 {
		total += cur[1].Sub(cur[0])
	}
	return total, n
}

// stallRT is a network that stalls now and then: a request sent during a
// stall reaches the server when the stall ends, together with every other
// one sent during it, as a loaded machine or a congested link delivers
// them.
type stallRT struct {
	rt     http.RoundTripper
	start  time.Time
	stalls [][2]time.Duration // [from, until) since start
}

func (s *stallRT) RoundTrip(req *http.Request) (*http.Response, error) {
	at := time.Since(s.start)
	for _, st := range s.stalls {
		if at >= st[0] && at < st[1] {
			time.Sleep(st[1] - at)
		}
	}
	return s.rt.RoundTrip(req)
}

// TestThrottleCostOverTenSeconds is BenchmarkThrottleCost in virtual time,
// with the jitter made explicit: 1,000/s for 10 s against a server that
// admits 1,000/s with a burst of 10, from a key with the same limit and
// burst, over a network that stalls for 20 ms twice. Each stall bunches 20
// requests up, the server throttles those beyond its burst with
// Retry-After: 1, and the key pauses 1 s. Each pause must cost at most
// its stated wait plus 50 ms of throughput.
func TestThrottleCostOverTenSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rate, burst, span, workers = 1000, 10, 10 * time.Second, 32
		srv := fakeserver.New(fakeserver.Config{Limit: rate, Burst: burst})
		start := time.Now()
		net := &stallRT{rt: srv.Transport(), start: start, stalls: [][2]time.Duration{
			{2500 * time.Millisecond, 2520 * time.Millisecond},
			{7000 * time.Millisecond, 7020 * time.Millisecond},
		}}
		var pz pauseLog
		tr := New(net, WithLimit(PerSecond(rate).WithBurst(burst)), WithHooks(Hooks{OnPause: pz.add}))
		var ok atomic.Int64
		end := start.Add(span)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for time.Now().Before(end) {
					resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
					if err != nil {
						t.Error(err)
						return
					}
					drain(resp)
					if resp.StatusCode == http.StatusOK {
						ok.Add(1)
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		lost := elapsed - time.Duration(float64(ok.Load()-burst)/rate*float64(time.Second))
		paused, n := pz.union(start.Add(elapsed))
		st := srv.Stats()
		t.Logf("%d ok in %v (%.1f/s), %d throttled, %d pauses covering %v, %v lost: %v per pause beyond the stated wait",
			ok.Load(), elapsed, float64(ok.Load())/elapsed.Seconds(), st.Rejected, n, paused, lost, (lost-paused)/time.Duration(max(n, 1)))
		assert.Equal(t, 2, n, "one pause per stall")
		assert.LessOrEqual(t, lost-paused, time.Duration(n)*50*time.Millisecond)
	})
}
