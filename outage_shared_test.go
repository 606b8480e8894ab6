package headway

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memFleet is a SharedQuota and SharedProber in memory, as sharedquota's
// Redis is: one GCRA per key at 100 a second with a burst of 10, and one
// outage per key whose probe turn one process holds at a time. Each
// Transport holds a view of it (see view), which names its process.
type memFleet struct {
	mu     sync.Mutex
	tat    map[string]time.Time
	outage map[string]*memOutage
	broken bool                 // every call of the prober fails, as with Redis away
	calls  int                  // calls of the prober that would be round trips
	limit  map[string]time.Time // until when a key's overloads are a limit's (see SharedVerdict)
	told   int                  // calls of TellLimit that told a limit
}

type memOutage struct {
	next  time.Time
	iv    time.Duration
	owner int // 0: none
	until time.Time
	given bool // a turn was given
}

func newMemFleet() *memFleet {
	return &memFleet{tat: map[string]time.Time{}, outage: map[string]*memOutage{}, limit: map[string]time.Time{}}
}

// view is f as process id (from 1) sees it.
func (f *memFleet) view(id int) *fleetView { return &fleetView{f: f, id: id} }

type fleetView struct {
	f  *memFleet
	id int
}

var (
	_ SharedQuota   = (*fleetView)(nil)
	_ SharedProber  = (*fleetView)(nil)
	_ SharedVerdict = (*fleetView)(nil)
)

var errBroken = errors.New("the fleet's store is away")

func (v *fleetView) Reserve(_ context.Context, key string, _ []Limit, _ int, within time.Duration) (time.Duration, error) {
	const iv, burst = 10 * time.Millisecond, 10
	f := v.f
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	tat := f.tat[key]
	if tat.Before(now) {
		tat = now
	}
	d := tat.Add(-(burst - 1) * iv)
	if d.Before(now) {
		d = now
	}
	if d.Sub(now) > within {
		return d.Sub(now), nil
	}
	f.tat[key] = tat.Add(iv)
	return d.Sub(now), nil
}

func (v *fleetView) Pause(context.Context, string, time.Duration) error { return nil }

func (v *fleetView) HostState(key string) (bool, time.Duration) {
	f := v.f
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.outage[key]
	if o == nil || f.broken {
		return false, 0
	}
	return true, time.Until(o.next)
}

func (v *fleetView) HostDown(_ context.Context, key string, initial, most time.Duration) (time.Duration, error) {
	f := v.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.broken {
		return 0, errBroken
	}
	now := time.Now()
	o := f.outage[key]
	switch {
	case o == nil:
		o = &memOutage{iv: initial}
		f.outage[key] = o
	case (o.owner != v.id || !o.until.After(now)) && (o.given || !now.Add(initial).Before(o.next)):
		return max(o.next.Sub(now), 0), nil
	case o.owner != v.id || !o.until.After(now):
		o.iv = initial // no turn given yet: the first probe comes forward
	default:
		o.iv = min(2*o.iv, most)
	}
	o.next, o.owner = now.Add(o.iv), 0
	return o.iv, nil
}

func (v *fleetView) HostUp(_ context.Context, key string) error {
	f := v.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.broken {
		return errBroken
	}
	delete(f.outage, key)
	return nil
}

func (v *fleetView) ProbeTurn(_ context.Context, key string) (time.Duration, error) {
	f := v.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.broken {
		return 0, errBroken
	}
	now := time.Now()
	o := f.outage[key]
	switch {
	case o == nil:
		return 0, nil
	case o.next.After(now):
		return o.next.Sub(now), nil
	case o.owner != 0 && o.owner != v.id && o.until.After(now):
		return o.until.Sub(now), nil
	}
	o.owner, o.until, o.given = v.id, now.Add(time.Second), true
	return 0, nil
}

func (v *fleetView) TellLimit(_ context.Context, key string, d time.Duration) error {
	f := v.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.broken {
		return errBroken
	}
	if d > 0 {
		f.told++
	}
	f.limit[key] = time.Now().Add(d)
	return nil
}

func (v *fleetView) HeardLimit(key string) time.Duration {
	f := v.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken {
		return 0
	}
	return time.Until(f.limit[key])
}

// sendLog records when requests of one Transport were sent.
type sendLog struct {
	base http.RoundTripper
	mu   sync.Mutex
	at   []time.Time
}

func (l *sendLog) RoundTrip(req *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.at = append(l.at, time.Now())
	l.mu.Unlock()
	return l.base.RoundTrip(req)
}

// firstAfter returns the first send at or after t; zero if none.
func (l *sendLog) firstAfter(t time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, _ := slices.BinarySearchFunc(l.at, t, func(a, b time.Time) int { return a.Compare(b) })
	if i == len(l.at) {
		return time.Time{}
	}
	return l.at[i]
}

// TestAFleetSendsOneProbe is the outage split over a fleet, in
// virtual time: 4 Transports with 2 workers each share a quota and a
// prober; 600 GETs at 100 a second in all, 3 s of 500s, or of a host that
// accepts and hangs past the client's timeout. Together they send no more
// into the outage than one Transport does alone, nothing fails, and once a
// probe finds the host back every Transport sends again within one recheck
// and one pacing interval. With the prober away, each probes on its own
// and nothing fails either.
func TestAFleetSendsOneProbe(t *testing.T) {
	for _, c := range []struct {
		name   string
		shape  fakeserver.OutageShape
		broken bool
	}{
		{"500s, shared", fakeserver.OutageError, false},
		{"500s, prober away", fakeserver.OutageError, true},
		{"hangs, shared", fakeserver.OutageHang, false},
		{"hangs, prober away", fakeserver.OutageHang, true},
	} {
		broken := c.broken
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fakeserver.New(fakeserver.Config{Limit: 100, Burst: 10,
					Faults: fakeserver.Faults{Outage: c.shape, Latency: 5 * time.Millisecond}})
				start := time.Now()
				from, to := start.Add(2*time.Second), start.Add(5*time.Second)
				srv.SetOutage(from, to)
				f := newMemFleet()
				f.broken = broken
				var (
					logs    []*sendLog
					wg      sync.WaitGroup
					failed  int64
					mu      sync.Mutex
					remains = 600
				)
				for i := range 4 {
					l := &sendLog{base: timeoutRT{srv.Transport(), 200 * time.Millisecond}}
					logs = append(logs, l)
					tr := New(l, WithLimit(PerSecond(100).WithBurst(9)), WithRetry(batchRetry), WithSharedQuota(f.view(i+1)))
					for range 2 {
						wg.Go(func() {
							for {
								mu.Lock()
								if remains == 0 {
									mu.Unlock()
									return
								}
								remains--
								mu.Unlock()
								resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
								if err == nil {
									drain(resp)
								}
								if err != nil || resp.StatusCode != 200 {
									mu.Lock()
									failed++
									mu.Unlock()
								}
							}
						})
					}
				}
				wg.Wait()
				st := srv.Stats()
				assert.Zero(t, failed)
				var firsts []time.Time
				for _, l := range logs {
					if at := l.firstAfter(to); !at.IsZero() {
						firsts = append(firsts, at)
					}
				}
				slices.SortFunc(firsts, func(a, b time.Time) int { return a.Compare(b) })
				lag := firsts[len(firsts)-1].Sub(firsts[0])
				t.Logf("%d sent into the outage, %d calls of the prober, took %v, first after it +%v, last Transport back %v later",
					st.Outage, f.calls, time.Since(start), firsts[0].Sub(to), lag)
				if broken {
					// Each probes on its own: its first failures, then its probes.
					assert.LessOrEqual(t, st.Outage, int64(4*9), "each probes on its own")
					return
				}
				assert.LessOrEqual(t, st.Outage, int64(8), "requests sent into the outage by the fleet")
				assert.Len(t, firsts, 4)
				// The probe's latency, then each Transport's recheck and
				// its next slot.
				assert.LessOrEqual(t, lag, 5*time.Millisecond+fleetRecheck+10*time.Millisecond, "every Transport resumes")
			})
		})
	}
}

// TestAFleetOutageHoldsAProcessThatSawNoFailure: a Transport that has not
// met the outage itself holds its requests while its fleet reports the
// host down: one whose deadline comes before the fleet's next probe fails
// at once, saying when that is; one that can wait is sent only once the
// fleet finds the host back, within one recheck, and nothing reaches the
// host meanwhile.
func TestAFleetOutageHoldsAProcessThatSawNoFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		f := newMemFleet()
		other := f.view(1)
		ctx := context.Background()
		w, err := other.HostDown(ctx, "api.test", 300*time.Millisecond, time.Second)
		require.NoError(t, err)
		require.Equal(t, 300*time.Millisecond, w)
		tr := New(stub, WithLimit(PerSecond(100)), WithSharedQuota(f.view(2)))

		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		began := time.Now()
		_, err = tr.RoundTrip(mustReq(t, "http://api.test/").WithContext(short))
		assert.Zero(t, time.Since(began), "failed at once")
		var we *WaitError
		require.ErrorAs(t, err, &we)
		assert.ErrorIs(t, err, ErrWaitTooLong)
		assert.Equal(t, 300*time.Millisecond, we.NextProbe.Sub(began), "the fleet's next probe: %v", err)

		// The other process's probe finds the host back at 200 ms.
		time.AfterFunc(200*time.Millisecond, func() { _ = other.HostUp(ctx, "api.test") })
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
		require.NoError(t, err)
		drain(resp)
		sent := stub.times()
		require.Len(t, sent, 1, "nothing sent while the fleet reported the host down")
		assert.GreaterOrEqual(t, sent[0].Sub(began), 200*time.Millisecond)
		assert.LessOrEqual(t, sent[0].Sub(began), 200*time.Millisecond+fleetRecheck)
	})
}

// onceLongQuota makes the first reservation wait an hour, then none.
type onceLongQuota struct{ calls int }

func (q *onceLongQuota) Reserve(context.Context, string, []Limit, int, time.Duration) (time.Duration, error) {
	q.calls++
	if q.calls == 1 {
		return time.Hour, nil
	}
	return 0, nil
}

func (q *onceLongQuota) Pause(context.Context, string, time.Duration) error { return nil }

// TestAFirstRequestNotSentDoesNotHoldTheKey: a key's first request goes
// alone, and the others wait for its answer; when it is not sent after all
// (here its shared slot is too far off), the next request is the first,
// sent at its slot, not a second later. Regression: the key waited for the
// answer to a request never sent.
func TestAFirstRequestNotSentDoesNotHoldTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{}
		tr := New(stub, WithLimit(PerSecond(100)), WithSharedQuota(&onceLongQuota{}))
		_, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
		require.ErrorIs(t, err, ErrWaitTooLong)
		began := time.Now()
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
		require.NoError(t, err)
		drain(resp)
		// The slot the first took is spent: one pacing interval at most.
		assert.LessOrEqual(t, time.Since(began), 10*time.Millisecond, "sent within one interval, not a second later")
	})
}

// TestAStallHoldsTheFleetUntilAnAnswer: a host that stops answering one
// process's request (here a slow call, 300 ms where answers take 5 ms)
// holds the whole fleet as soon as the silence is a stall (twice the usual
// latency and 10 ms), not only the process that sees it: another process's
// request waits, as does the next of the process that sees it, and both go
// within one recheck of the answer that ends it.
func TestAStallHoldsTheFleetUntilAnAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		slowA := &stubRT{onRound: func(req *http.Request) {
			if req.URL.Path == "/slow" {
				time.Sleep(300 * time.Millisecond)
			} else {
				time.Sleep(5 * time.Millisecond)
			}
		}}
		stubB := &stubRT{}
		a := New(slowA, WithLimit(PerSecond(100)), WithSharedQuota(f.view(1)))
		b := New(stubB, WithLimit(PerSecond(100)), WithSharedQuota(f.view(2)))
		get := func(tr *Transport, path string) {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test"+path))
			require.NoError(t, err)
			drain(resp)
		}
		for range 3 {
			get(a, "/") // a learns how long its answers take
		}
		time.Sleep(time.Second) // a's pace allows the next request at once
		began := time.Now()
		var wg sync.WaitGroup
		wg.Go(func() { get(a, "/slow") })
		time.Sleep(21 * time.Millisecond)
		down, _ := f.view(2).HostState("api.test")
		require.True(t, down, "the fleet heard of a's stall as soon as it was one")
		wg.Go(func() { get(a, "/") }) // a's own next request waits too
		get(b, "/")
		wg.Wait()
		sent := stubB.times()
		require.Len(t, sent, 1)
		assert.GreaterOrEqual(t, sent[0].Sub(began), 300*time.Millisecond, "b waited for a's answer")
		assert.LessOrEqual(t, sent[0].Sub(began), 300*time.Millisecond+fleetRecheck, "and went within one recheck of it")
		sentA := slowA.times()
		require.Len(t, sentA, 5)
		assert.GreaterOrEqual(t, sentA[4].Sub(began), 300*time.Millisecond, "a's next request waited for the answer")
		assert.LessOrEqual(t, sentA[4].Sub(began), 300*time.Millisecond+fleetRecheck, "and went within one recheck of it")
		down, _ = f.view(2).HostState("api.test")
		assert.False(t, down, "the answer ended the fleet's outage")
	})
}

// lateReports is a view of a memFleet whose reports of a host down reach
// the store late, as a round trip to Redis on a loaded machine may: the
// call returns, and takes effect, delay after it was made.
type lateReports struct {
	*fleetView
	delay time.Duration
}

func (v lateReports) HostDown(ctx context.Context, key string, initial, most time.Duration) (time.Duration, error) {
	time.Sleep(v.delay)
	return v.fleetView.HostDown(ctx, key, initial, most)
}

// TestAStallAnsweredWhileItsReportIsOutEndsForTheFleet: the answer that
// ends a stall comes while the report of the stall is still on its way to
// the fleet's store (here 20 ms late): the fleet hears of the answer after
// the report, not before it, and does not hold its processes until its
// next probe, a second on. (Seen on a loaded 2-core machine in
// sharedquota's TestFleetPause and TestFleetOverload: an answer late by a
// few milliseconds on loopback made a stall; its end reached Redis before
// its report, and the fleet failed every request with less than a second
// left, for a second.)
func TestAStallAnsweredWhileItsReportIsOutEndsForTheFleet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		slowA := &stubRT{onRound: func(req *http.Request) {
			if req.URL.Path == "/slow" {
				time.Sleep(30 * time.Millisecond) // a stall from 20 ms on
			} else {
				time.Sleep(5 * time.Millisecond)
			}
		}}
		stubB := &stubRT{}
		a := New(slowA, WithLimit(PerSecond(100)), WithSharedQuota(lateReports{f.view(1), 20 * time.Millisecond}))
		b := New(stubB, WithLimit(PerSecond(100)), WithSharedQuota(f.view(2)))
		get := func(tr *Transport, path string) {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test"+path))
			require.NoError(t, err)
			drain(resp)
		}
		for range 3 {
			get(a, "/") // a learns how long its answers take
		}
		time.Sleep(time.Second)
		began := time.Now()
		get(a, "/slow") // answered at 30 ms; the report lands at 40 ms
		assert.LessOrEqual(t, time.Since(began), 41*time.Millisecond, "the answer waits for the report out (back at 40 ms and a tick), no more")
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		down, _ := f.view(2).HostState("api.test")
		assert.False(t, down, "the fleet still holds for a stall that was answered")
		asked := time.Now()
		get(b, "/")
		sent := stubB.times()
		require.Len(t, sent, 1)
		assert.LessOrEqual(t, sent[0].Sub(asked), fleetRecheck, "b waited for the fleet's probe")
	})
}
