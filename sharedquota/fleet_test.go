package sharedquota

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headway-go/headway/fakeserver"
)

var fleetMD = flag.String("fleet-md", "", "write BenchmarkFleetEfficiency's table, in Markdown, to this file")

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

// TestFleetShares runs 3 processes × 16 goroutines through headway's
// Transport and one shared quota of 60 requests a second, against a server
// that allows 100: together they must send what one process would (the
// limit, its burst and a lease per process at most), not three times it,
// see each other announced, and make progress. It checks counts, which
// scheduling noise cannot raise, not rates: a loaded machine makes the
// fleet slower, never faster. The exact figures (0 throttled, ≥ 95% of the
// limit, at the server's own limit) are BenchmarkFleet's.
func TestFleetShares(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3s run of 3 processes")
	}
	for _, lease := range []int{0, 5} {
		t.Run("lease="+strconv.Itoa(lease), func(t *testing.T) {
			const (
				rate  = 60
				burst = 5
				dur   = 3 * time.Second
			)
			addr := redisAddr(t)
			// The server's burst is large: a loaded machine that stalls it
			// (or a worker) for a few hundred milliseconds delivers the
			// requests of that time at once, which a burst of 10 would
			// throttle although the fleet kept to its 60/s.
			fs, err := fakeserver.Start(fakeserver.Config{Limit: 100, Window: time.Second, Burst: 40})
			if err != nil {
				t.Fatal(err)
			}
			defer fs.Close()
			res := runFleet(t, 3, workerConfig{
				Redis: addr, URL: fs.URL, Prefix: testPrefix(t),
				Rate: rate, Burst: burst, Goroutines: 16, Lease: lease,
				// A slow Redis under load is still Redis: no fallback.
				Timeout: 2 * time.Second,
				Start:   time.Now().Add(2 * time.Second), Duration: dur,
			})
			st, errs := fleetReport(t, fs, res, rate*dur.Seconds()+burst)
			if errs != 0 {
				t.Errorf("%d requests failed", errs)
			}
			sent := st.Admitted + st.Rejected
			if most := int64(rate*dur.Seconds()) + burst + 3*int64(lease) + 3; sent > most {
				t.Errorf("the fleet sent %d requests in %v, over the %d one process may: the quota is not shared", sent, dur, most)
			}
			if st.Rejected > sent/10 {
				t.Errorf("the server rejected %d of %d requests, at 60%% of its limit", st.Rejected, sent)
			}
			if least := int64(rate * dur.Seconds() / 2); st.Admitted < least {
				t.Errorf("admitted %d, not even half the limit (%d)", st.Admitted, least)
			}
			for i, r := range res {
				if r.MaxLive != 3 {
					t.Errorf("worker %d saw at most %d live processes, want 3", i, r.MaxLive)
				}
			}
		})
	}
}

// fleetReport logs the workers' results and the server's, and returns the
// server's counts and the workers' errors.
func fleetReport(t testing.TB, fs *fakeserver.Running, res []workerResult, allowed float64) (fakeserver.Stats, int64) {
	t.Helper()
	var tooMany, errs, trips, resv int64
	for i, r := range res {
		t.Logf("worker %d: %d ok, %d 429, %d errors, %d held by a host reported down, %d cut at the end; %+v; live %d", i, r.OK, r.TooMany, r.Errors, r.Held, r.Cut, r.Stats, r.MaxLive)
		tooMany += r.TooMany
		errs += r.Errors
		trips += r.Stats.RoundTrips
		resv += r.Stats.Reservations
	}
	st := fs.Server.Stats()
	t.Logf("server: %+v, peak %d in any 1s; admitted %.1f%% of %v; %.3f round trips per reservation",
		st, fs.Server.PeakRate(time.Second), 100*float64(st.Admitted)/allowed, allowed, float64(trips)/float64(max(resv, 1)))
	return st, errs
}

// BenchmarkFleet runs 3 processes × 16 goroutines against one limit of 100
// requests a second for 5 seconds, at the server's own limit, through
// headway's Transport and one shared quota, and reports what the server saw:
// the share of the limit it admitted, its rejections, and the busiest
// second. On an idle machine: 0 rejected, ≥ 95% admitted. Run with
//
//	go test -run '^$' -bench Fleet -benchtime 1x ./sharedquota/
func BenchmarkFleet(b *testing.B) {
	for _, lease := range []int{0, 5} {
		b.Run("lease="+strconv.Itoa(lease), func(b *testing.B) {
			const (
				rate  = 100
				burst = 10
				dur   = 5 * time.Second
			)
			addr := redisAddr(b)
			for range b.N {
				fs, err := fakeserver.Start(fakeserver.Config{Limit: rate, Window: time.Second, Burst: burst})
				if err != nil {
					b.Fatal(err)
				}
				res := runFleet(b, 3, workerConfig{
					Redis: addr, URL: fs.URL, Prefix: testPrefix(b),
					Rate: rate, Burst: burst - 2, Goroutines: 16, Lease: lease,
					Start: time.Now().Add(time.Second), Duration: dur,
				})
				allowed := float64(rate)*dur.Seconds() + burst
				st, _ := fleetReport(b, fs, res, allowed)
				b.ReportMetric(100*float64(st.Admitted)/allowed, "admitted-%")
				b.ReportMetric(float64(st.Rejected), "rejected")
				b.ReportMetric(float64(fs.Server.PeakRate(time.Second)), "peak/s")
				fs.Close()
			}
		})
	}
}

// TestFleetPause: a pause set by one process (as the Transport does on a
// 429 with a wait) stops the other two until it ends.
func TestFleetPause(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3s run of 3 processes")
	}
	const (
		rate    = 50
		pauseAt = time.Second
		pause   = 1500 * time.Millisecond
	)
	addr := redisAddr(t)
	arr := &arrivals{at: map[int][]time.Time{}}
	fs, err := fakeserver.Start(fakeserver.Config{Limit: 2 * rate, Window: time.Second, Burst: 10, Handler: arr.handler()})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	start := time.Now().Add(2 * time.Second)
	// Few goroutines, so that few reservations are ahead when the pause
	// comes: the test measures the pause, not the slots reserved before it
	// (which check the pause again before they leave).
	res := runFleet(t, 3, workerConfig{
		Redis: addr, URL: fs.URL, Prefix: testPrefix(t),
		Rate: rate, Burst: 5, Goroutines: 2,
		Timeout: 2 * time.Second,
		Start:   start, Duration: pauseAt + pause + time.Second,
		PauseAt: pauseAt, Pause: pause,
	})
	pausedAt := res[0].PausedAt
	if pausedAt.IsZero() {
		t.Fatal("worker 0 could not pause")
	}
	// Nothing but requests reserved before the pause (2 goroutines × 3
	// workers, 20ms apart) may arrive from 250ms into the pause (time for a
	// loaded machine to deliver those) to its end. The pause began between
	// the call to Pause and its return: the window starts after the
	// latter and ends before the former's end.
	from, to := pausedAt.Add(250*time.Millisecond), res[0].PauseCalled.Add(pause)
	for w := range 3 {
		ts := arr.at[w]
		in := 0
		for _, at := range ts {
			if at.After(from) && at.Before(to.Add(-20*time.Millisecond)) {
				in++
			}
		}
		after := 0
		if i := slices.IndexFunc(ts, func(at time.Time) bool { return at.After(to) }); i >= 0 {
			after = len(ts) - i
		}
		t.Logf("worker %d: %d requests, %d during the pause, %d after it; %d held by a host reported down", w, len(ts), in, after, res[w].Held)
		if in != 0 {
			t.Errorf("worker %d sent %d requests during the pause", w, in)
		}
		if after == 0 {
			t.Errorf("worker %d sent nothing after the pause", w)
		}
	}
	if st := fs.Server.Stats(); st.Rejected > st.Admitted/20 {
		t.Errorf("the server rejected %d requests, at half its limit", st.Rejected)
	}
}

// overloadConfig is item 1 of issue 10: 3 processes offer 60 requests a
// second in all, each with a 300ms deadline, against a shared limit of 50
// a second (the server's). Slots spent on requests that cannot wait for
// them used to push the shared schedule ever further ahead until nothing
// was served.
func overloadConfig(tb testing.TB, addr, url string, dur time.Duration) workerConfig {
	return workerConfig{
		Redis: addr, URL: url, Prefix: testPrefix(tb),
		Rate: 50, Burst: 5, Goroutines: 8,
		Offered: 20, ReqTimeout: 300 * time.Millisecond,
		Timeout: 2 * time.Second,
		Start:   time.Now().Add(2 * time.Second), Duration: dur,
	}
}

// TestFleetOverload: overloaded, the fleet keeps serving: in the second
// half of a 4s run it serves at least half the limit (it served 0/s after
// 2.5s before reservations learned the caller's deadline). The figure on
// an idle machine (≥ 95% of the limit) is BenchmarkFleetOverload's.
func TestFleetOverload(t *testing.T) {
	if testing.Short() {
		t.Skip("a 4s run of 3 processes")
	}
	addr := redisAddr(t)
	fs, err := fakeserver.Start(fakeserver.Config{Limit: 50, Window: time.Second, Burst: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	const dur = 4 * time.Second
	cfg := overloadConfig(t, addr, fs.URL, dur)
	// The shared schedule alone: on a loaded machine a request of 2 ms on
	// loopback can go unanswered past its caller's 300 ms, and the
	// outage state then rightly holds the fleet until its next probe, up
	// to a second of the two this test counts (the outage state has tests
	// of its own).
	cfg.NoOutage = true
	res := runFleet(t, 3, cfg)
	var second int64
	for i, r := range res {
		t.Logf("worker %d: %d ok (%d in the second half), %d late (%d held by a host reported down), %d dropped, %d 429, %d errors; %+v",
			i, r.OK, r.SecondHalf, r.Late, r.Held, r.Dropped, r.TooMany, r.Errors, r.Stats)
		second += r.SecondHalf
	}
	rate := float64(second) / (dur / 2).Seconds()
	t.Logf("served %.1f/s in the second half, limit 50/s; server %+v", rate, fs.Server.Stats())
	if rate < 25 {
		t.Errorf("served %.1f/s in the second half, under half the limit of 50/s: the fleet stalls", rate)
	}
}

// BenchmarkFleetOverload reports what TestFleetOverload checks, over 8s:
// the share of the limit served in the second half of the run.
//
//	go test -run '^$' -bench FleetOverload -benchtime 1x ./sharedquota/
func BenchmarkFleetOverload(b *testing.B) {
	addr := redisAddr(b)
	const dur = 8 * time.Second
	for range b.N {
		fs, err := fakeserver.Start(fakeserver.Config{Limit: 50, Window: time.Second, Burst: 10})
		if err != nil {
			b.Fatal(err)
		}
		res := runFleet(b, 3, overloadConfig(b, addr, fs.URL, dur))
		var second, late, tooMany int64
		for _, r := range res {
			second += r.SecondHalf
			late += r.Late
			tooMany += r.TooMany
		}
		b.ReportMetric(100*float64(second)/(dur/2).Seconds()/50, "served-%-of-limit")
		b.ReportMetric(float64(late), "late")
		b.ReportMetric(float64(tooMany), "throttled")
		fs.Close()
	}
}

// BenchmarkFleetEfficiency is issue 10's efficiency table: 4 processes × 2
// goroutines send 80 requests in all to the fake server (a token bucket,
// 20ms service time), through headway sharing one quota in Redis, and
// through go-redis/redis_rate. It reports efficiency (the least possible
// time, (80 − burst)/rate plus one service time, over the time taken),
// the requests the server throttled, and those sent while it had told the
// client to wait (early). Run with
//
//	go test -run '^$' -bench FleetEfficiency -benchtime 1x ./sharedquota/
//
// With -fleet-md FILE it also writes the table, in Markdown, to FILE:
// BENCHMARKS.md includes bench/fleet.md.
//
//	go test -run '^$' -bench FleetEfficiency -benchtime 1x ./sharedquota/ -fleet-md ../bench/fleet.md
func BenchmarkFleetEfficiency(b *testing.B) {
	var md strings.Builder
	md.WriteString("| server | client | efficiency | throttled | sent during a pause | time |\n|---|---|---:|---:|---:|---:|\n")
	defer func() {
		if *fleetMD != "" {
			if err := os.WriteFile(*fleetMD, []byte(md.String()), 0o644); err != nil {
				b.Error(err)
			}
		}
	}()
	type row struct {
		name           string
		dialect        fakeserver.Dialect
		rate, burst    int
		noLimit, alone bool
		contender      string
	}
	for _, r := range []row{
		{name: "IETF, 20/s burst 10: headway, limits, shared", dialect: fakeserver.IETF{}, rate: 20, burst: 10},
		{name: "IETF, 20/s burst 10: headway, limits, not shared", dialect: fakeserver.IETF{}, rate: 20, burst: 10, alone: true},
		{name: "IETF, 20/s burst 10: headway, no limits, shared", dialect: fakeserver.IETF{}, rate: 20, burst: 10, noLimit: true},
		{name: "IETF, 20/s burst 10: redis_rate, limits", dialect: fakeserver.IETF{}, rate: 20, burst: 10, contender: "redis_rate"},
		{name: "bare 429s, 10/s burst 5: headway, limits, shared", dialect: fakeserver.Bare{}, rate: 10, burst: 5},
		{name: "bare 429s, 10/s burst 5: headway, no limits, shared", dialect: fakeserver.Bare{}, rate: 10, burst: 5, noLimit: true},
		{name: "bare 429s, 10/s burst 5: redis_rate, limits", dialect: fakeserver.Bare{}, rate: 10, burst: 5, contender: "redis_rate"},
	} {
		b.Run(r.name, func(b *testing.B) {
			addr := redisAddr(b)
			const n, procs = 80, 4
			const service = 20 * time.Millisecond
			for range b.N {
				fs, err := fakeserver.Start(fakeserver.Config{
					Limit: r.rate, Window: time.Second, Burst: r.burst, Dialect: r.dialect,
					Faults: fakeserver.Faults{Latency: service},
				})
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now().Add(2 * time.Second)
				res := runFleet(b, procs, workerConfig{
					Redis: addr, URL: fs.URL, Prefix: testPrefix(b),
					Rate: r.rate, Burst: r.burst, Goroutines: 2, Requests: n / procs,
					NoLimit: r.noLimit, Alone: r.alone, Contender: r.contender,
					Start: start, Duration: time.Minute,
					// Redis as patient as redis_rate's (no timeout of its
					// own): on this loaded machine a call over the default
					// 50ms would measure the host, through the fallback,
					// not the fleet's pacing. BenchmarkFleetFaults plays
					// the faults.
					Timeout: 2 * time.Second,
				})
				var done time.Time
				var errs, degraded int64
				for _, w := range res {
					if w.Done.After(done) {
						done = w.Done
					}
					errs += w.Errors
					degraded += w.Stats.Degraded
				}
				least := time.Duration(float64(n-r.burst)/float64(r.rate)*float64(time.Second)) + service
				st := fs.Server.Stats()
				eff := least.Seconds() / done.Sub(start).Seconds()
				server, client, _ := strings.Cut(r.name, ": ")
				fmt.Fprintf(&md, "| %s | %s | %.3f | %d | %d | %.2fs |\n", server, client, eff, st.Rejected, st.Early, done.Sub(start).Seconds())
				b.ReportMetric(eff, "efficiency")
				b.ReportMetric(float64(st.Rejected), "throttled")
				b.ReportMetric(float64(st.Early), "early")
				b.ReportMetric(float64(errs), "errors")
				b.ReportMetric(float64(degraded), "fallbacks")
				fs.Close()
			}
		})
	}
}

// BenchmarkFleetFaults runs 3 processes × 8 goroutines at the server's
// limit (100/s) for 6s, through headway sharing one quota, while Redis is
// killed at 2s and started again, empty, at 4s: the fault transitions of
// issue 10, item 3. It reports what the server saw: throttles, the busiest
// second against what the limit allows in one (rate + burst), and the
// share of the limit admitted. Run with
//
//	go test -run '^$' -bench FleetFaults -benchtime 1x ./sharedquota/
func BenchmarkFleetFaults(b *testing.B) {
	for _, burst := range []int{10, 200} {
		b.Run("server-burst="+strconv.Itoa(burst), func(b *testing.B) {
			const rate, dur = 100, 6 * time.Second
			for range b.N {
				srv := startRedis(b)
				arr := &arrivals{at: map[int][]time.Time{}}
				fs, err := fakeserver.Start(fakeserver.Config{Limit: rate, Window: time.Second, Burst: burst, Handler: arr.handler()})
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now().Add(2 * time.Second)
				go func() {
					time.Sleep(time.Until(start.Add(2 * time.Second)))
					srv.kill()
					time.Sleep(2 * time.Second)
					if err := srv.start(); err != nil {
						b.Error(err)
					}
				}()
				res := runFleet(b, 3, workerConfig{
					Redis: srv.addr(), URL: fs.URL, Prefix: testPrefix(b),
					Rate: rate, Burst: burst - 2, Goroutines: 8,
					Start: start, Duration: dur,
				})
				var degraded int64
				for _, r := range res {
					degraded += r.Stats.Degraded
				}
				st := fs.Server.Stats()
				b.ReportMetric(float64(st.Rejected), "throttled")
				b.ReportMetric(float64(fs.Server.PeakRate(time.Second)), "peak/s")
				b.ReportMetric(float64(rate+burst), "allowed/s")
				b.ReportMetric(100*float64(st.Admitted)/(rate*dur.Seconds()+float64(burst)), "admitted-%")
				b.ReportMetric(float64(degraded), "fallbacks")
				// The busiest second of the outage, and of the recovery
				// (from the restart to the end), as the server saw them.
				var during, after []time.Time
				for _, ts := range arr.at {
					for _, at := range ts {
						switch {
						case at.After(start.Add(2*time.Second)) && at.Before(start.Add(4*time.Second)):
							during = append(during, at)
						case at.After(start.Add(4 * time.Second)):
							after = append(after, at)
						}
					}
				}
				b.ReportMetric(float64(peakIn(during, time.Second)), "outage-peak/s")
				b.ReportMetric(float64(peakIn(after, time.Second)), "recovery-peak/s")
				fs.Close()
			}
		})
	}
}

// peakIn returns the most of ts in any window of w.
func peakIn(ts []time.Time, w time.Duration) int {
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	best, i := 0, 0
	for j := range ts {
		for ts[j].Sub(ts[i]) >= w {
			i++
		}
		best = max(best, j-i+1)
	}
	return best
}

// BenchmarkFleetBareSweep runs the bare-429 row of BenchmarkFleetEfficiency
// (no limits configured, sharing) at other server rates, bursts, process
// counts and workers: the fleet's pace after bare throttles is one rule,
// not one tuned to 10/s burst 5. Each row sends what the server allows in
// about 6s. Run with
//
//	go test -run '^$' -bench FleetBareSweep -benchtime 1x ./sharedquota/
func BenchmarkFleetBareSweep(b *testing.B) {
	for _, r := range []struct{ rate, burst, procs, workers int }{
		{10, 5, 4, 2}, {20, 10, 4, 2}, {5, 1, 2, 2}, {50, 10, 3, 4}, {25, 50, 6, 2}, {100, 20, 4, 4},
	} {
		name := fmt.Sprintf("%d/s_burst_%d_%dx%d", r.rate, r.burst, r.procs, r.workers)
		b.Run(name, func(b *testing.B) {
			addr := redisAddr(b)
			n := r.rate*6 + r.burst
			n -= n % r.procs
			const service = 20 * time.Millisecond
			for range b.N {
				fs, err := fakeserver.Start(fakeserver.Config{
					Limit: r.rate, Window: time.Second, Burst: r.burst, Dialect: fakeserver.Bare{},
					Faults: fakeserver.Faults{Latency: service},
				})
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now().Add(2 * time.Second)
				res := runFleet(b, r.procs, workerConfig{
					Redis: addr, URL: fs.URL, Prefix: testPrefix(b),
					Goroutines: r.workers, Requests: n / r.procs, NoLimit: true,
					Start: start, Duration: time.Minute, Timeout: 2 * time.Second,
				})
				var done time.Time
				for _, w := range res {
					if w.Done.After(done) {
						done = w.Done
					}
				}
				least := time.Duration(float64(n-r.burst)/float64(r.rate)*float64(time.Second)) + service
				st := fs.Server.Stats()
				b.ReportMetric(least.Seconds()/done.Sub(start).Seconds(), "efficiency")
				b.ReportMetric(float64(st.Rejected), "throttled")
				fs.Close()
			}
		})
	}
}

// BenchmarkFleetStatedQuotaSweep runs 3 processes of 4 workers, no limits
// configured, sharing, against a bucket of 20/s burst 10 whose answers
// state what is left in one dialect after another (none of them a policy,
// but for IETF's), without a penalty and with a block of 3 s that every
// request during it restarts, answered bare, with the block's end, or with
// the window's wait. Each row sends 150 requests (least: 7 s); a row the
// fleet cannot finish ends at a minute, and reports what was answered.
// Run with
//
//	go test -run '^$' -bench FleetStatedQuotaSweep -benchtime 1x ./sharedquota/
func BenchmarkFleetStatedQuotaSweep(b *testing.B) {
	dialects := []struct {
		name string
		d    fakeserver.Dialect
	}{
		{"x-ratelimit", fakeserver.XRateLimit{}}, {"github", fakeserver.GitHub{}}, {"openai", fakeserver.OpenAI{}},
		{"anthropic", fakeserver.Anthropic{}}, {"shopify", fakeserver.Shopify{}}, {"azure", fakeserver.AzureOpenAI{}},
		{"ietf", fakeserver.IETF{}},
	}
	for _, d := range dialects {
		for _, block := range []fakeserver.BlockStatement{-1, fakeserver.StateNothing, fakeserver.StateBlockEnd, fakeserver.StateWindow} {
			pen, name := fakeserver.Penalty{}, d.name+"/no_block"
			if block >= 0 {
				pen = fakeserver.Penalty{Block: 3 * time.Second, Extend: true, BlockStates: block}
				name = d.name + "/block_" + block.String()
			}
			b.Run(name, func(b *testing.B) {
				addr := redisAddr(b)
				const n, rate, burst = 150, 20, 10
				for range b.N {
					fs, err := fakeserver.Start(fakeserver.Config{Limit: rate, Window: time.Second, Burst: burst, Dialect: d.d, Penalty: pen})
					if err != nil {
						b.Fatal(err)
					}
					start := time.Now().Add(2 * time.Second)
					res := runFleet(b, 3, workerConfig{
						Redis: addr, URL: fs.URL, Prefix: testPrefix(b),
						Goroutines: 4, Requests: n / 3, NoLimit: true,
						Start: start, Duration: time.Minute, Timeout: 2 * time.Second,
					})
					var done time.Time
					var ok int64
					for _, w := range res {
						ok += w.OK
						if w.Done.After(done) {
							done = w.Done
						}
					}
					least := time.Duration(float64(n-burst) / rate * float64(time.Second))
					st := fs.Server.Stats()
					b.ReportMetric(least.Seconds()/done.Sub(start).Seconds(), "efficiency")
					b.ReportMetric(float64(ok), "answered")
					b.ReportMetric(float64(st.Rejected), "throttled")
					b.ReportMetric(float64(st.Blocked), "blocked")
					fs.Close()
				}
			})
		}
	}
}
