package sharedquota

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/headway-go/headway/fakeserver"
)

// arrivals records when each worker's admitted requests reached the server.
type arrivals struct {
	mu sync.Mutex
	at map[int][]time.Time
}

func (a *arrivals) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(r.Header.Get("X-Worker"))
		a.mu.Lock()
		a.at[i] = append(a.at[i], time.Now())
		a.mu.Unlock()
		w.Write([]byte("{}"))
	})
}

// TestFleetExact runs 3 processes × 16 goroutines against one limit of 100
// requests a second for 5 seconds, through headway's Transport and one
// shared quota: the server must reject nothing, see no more than the limit
// in any second, and admit at least 95% of what the limit allows.
func TestFleetExact(t *testing.T) {
	if testing.Short() {
		t.Skip("a 5s run of 3 processes")
	}
	for _, lease := range []int{0, 5} {
		t.Run("lease="+strconv.Itoa(lease), func(t *testing.T) {
			testFleet(t, lease)
		})
	}
}

func testFleet(t *testing.T, lease int) {
	const (
		rate  = 100
		burst = 10
		dur   = 5 * time.Second
	)
	addr := redisAddr(t)
	fs, err := fakeserver.Start(fakeserver.Config{Limit: rate, Window: time.Second, Burst: burst})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	res := runFleet(t, 3, workerConfig{
		Redis: addr, URL: fs.URL, Prefix: testPrefix(t),
		Rate: rate, Burst: burst - 2, Goroutines: 16, Lease: lease,
		Start: time.Now().Add(time.Second), Duration: dur,
	})
	st := fs.Server.Stats()
	peak := fs.Server.PeakRate(time.Second)
	var ok, tooMany, errs, trips, resv int64
	for i, r := range res {
		t.Logf("worker %d: %d ok, %d 429, %d errors, %d cut at the end; %+v; live %d", i, r.OK, r.TooMany, r.Errors, r.Cut, r.Stats, r.Live)
		ok += r.OK
		tooMany += r.TooMany
		errs += r.Errors
		trips += r.Stats.RoundTrips
		resv += r.Stats.Reservations
	}
	allowed := float64(rate)*dur.Seconds() + burst
	t.Logf("server: %+v, peak %d in any 1s; admitted %.1f%% of %v; %.3f round trips per reservation",
		st, peak, 100*float64(st.Admitted)/allowed, allowed, float64(trips)/float64(resv))
	if st.Rejected != 0 || tooMany != 0 {
		t.Errorf("the server rejected %d requests (workers saw %d 429s)", st.Rejected, tooMany)
	}
	if errs != 0 {
		t.Errorf("%d requests failed", errs)
	}
	if peak > rate+burst {
		t.Errorf("peak %d in a second, over the limit %d + burst %d", peak, rate, burst)
	}
	if float64(st.Admitted) < 0.95*allowed {
		t.Errorf("admitted %d, under 95%% of %v", st.Admitted, allowed)
	}
	for i, r := range res {
		if r.Live != 3 {
			t.Errorf("worker %d counted %d live processes, want 3", i, r.Live)
		}
	}
}

// TestFleetPause: a pause set by one process (as the Transport does on a
// 429 with a wait) stops the other two until it ends.
func TestFleetPause(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3s run of 3 processes")
	}
	const (
		rate    = 100
		pauseAt = time.Second
		pause   = time.Second
	)
	addr := redisAddr(t)
	arr := &arrivals{at: map[int][]time.Time{}}
	fs, err := fakeserver.Start(fakeserver.Config{Limit: rate, Window: time.Second, Burst: 10, Handler: arr.handler()})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	start := time.Now().Add(time.Second)
	// Few goroutines, so that few reservations are ahead when the pause
	// comes: the test measures the pause, not the slots reserved before it
	// (which check the pause again before they leave).
	runFleet(t, 3, workerConfig{
		Redis: addr, URL: fs.URL, Prefix: testPrefix(t),
		Rate: rate, Burst: 8, Goroutines: 2,
		Start: start, Duration: 3 * time.Second,
		PauseAt: pauseAt, Pause: pause,
	})
	// Nothing but requests reserved before the pause (2 goroutines × 3
	// workers, 10ms apart) may arrive from 100ms into the pause to its end.
	from, to := start.Add(pauseAt+100*time.Millisecond), start.Add(pauseAt+pause)
	for w := range 3 {
		ts := arr.at[w]
		in := 0
		for _, at := range ts {
			if at.After(from) && at.Before(to.Add(-5*time.Millisecond)) {
				in++
			}
		}
		after := len(ts) - slices.IndexFunc(ts, func(at time.Time) bool { return at.After(to) })
		t.Logf("worker %d: %d requests, %d during the pause, %d after it", w, len(ts), in, after)
		if in != 0 {
			t.Errorf("worker %d sent %d requests during the pause", w, in)
		}
		if slices.IndexFunc(ts, func(at time.Time) bool { return at.After(to) }) < 0 {
			t.Errorf("worker %d sent nothing after the pause", w)
		}
	}
	if st := fs.Server.Stats(); st.Rejected != 0 {
		t.Errorf("the server rejected %d requests", st.Rejected)
	}
}
