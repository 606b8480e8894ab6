package sharedquota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/headway-go/headway"
	"github.com/redis/go-redis/v9"
)

// The fleet tests run their workers as processes of their own: the test
// binary started again with helperEnv set, configured by the variables
// below, which prints a workerResult as JSON on stdout.
const helperEnv = "SHAREDQUOTA_TEST_HELPER"

type workerConfig struct {
	Index      int
	Redis      string
	URL        string
	Prefix     string
	Rate       int
	Burst      int
	Goroutines int
	Lease      int
	Start      time.Time     // when to begin, the same for every worker
	Duration   time.Duration // how long to send
	PauseAt    time.Duration // after Start, call Pause (worker 0 only); 0: never
	Pause      time.Duration
	Timeout    time.Duration // WithTimeout; 0: the default
	// Offered, when set, sends an open loop of Offered requests a second
	// (at most Goroutines at once; an arrival finding none free is
	// dropped), each with a deadline of ReqTimeout, instead of each
	// goroutine sending one request after another.
	Offered    int
	ReqTimeout time.Duration
	// Requests, when set, makes the worker send that many requests in all
	// (its goroutines take them from one count) and stop, instead of
	// sending for Duration (which then only bounds the run).
	Requests int
	// NoLimit configures no limit: the Transport paces by what the server
	// says alone. Alone shares nothing. Contender "redis_rate" replaces
	// headway with go-redis/redis_rate at Rate and Burst, waiting out each
	// refusal's RetryAfter.
	NoLimit, Alone bool
	Contender      string
	// NoOutage turns the Transport's outage state off (a negative
	// RetryOptions.ProbeInterval), for tests of the shared schedule alone.
	NoOutage bool
	// Attempts, when set, is RetryOptions.MaxAttempts, with no bound on
	// the time retries take: a request goes on through a server's block.
	Attempts int
}

type workerResult struct {
	OK, TooMany, Errors, Cut int64
	// Held counts the requests that failed at once because the fleet
	// held their key for a host it reported down (a WaitError with
	// NextProbe): the worker tries again.
	Held int64
	// SecondHalf counts the OK responses of the second half of the run.
	// Late counts the open loop's requests that failed their deadline
	// (a WaitError or the deadline itself), Dropped the arrivals that
	// found every goroutine busy.
	SecondHalf, Late, Dropped int64
	Stats                     Stats
	// MaxLive is the most processes the worker saw announced during the
	// run (sampled every 50ms): the count at the very end races with the
	// other workers' Close.
	MaxLive int
	// PauseCalled and PausedAt are when worker 0 called Pause and when
	// the call returned (zero if it made none or it failed): the pause
	// began between the two.
	PauseCalled, PausedAt time.Time
	// Done is when the last of Requests was answered.
	Done time.Time
}

const fleetKey = "fleet-token"

func helperMain(mode string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(mode), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	res, err := runWorker(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

func runWorker(cfg workerConfig) (workerResult, error) {
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis, ContextTimeoutEnabled: true, PoolSize: cfg.Goroutines})
	defer rdb.Close()
	q := NewRedis(rdb, WithPrefix(cfg.Prefix), WithLease(cfg.Lease), WithHeartbeat(200*time.Millisecond), WithTimeout(cfg.Timeout))
	defer q.Close()
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = cfg.Goroutines
	defer base.CloseIdleConnections()
	opts := []headway.Option{headway.WithKey(func(*http.Request) string { return fleetKey })}
	if !cfg.NoLimit {
		opts = append(opts, headway.WithLimit(headway.PerSecond(cfg.Rate).WithBurst(cfg.Burst)))
	}
	if !cfg.Alone {
		opts = append(opts, headway.WithSharedQuota(q))
	}
	switch {
	case cfg.NoOutage:
		opts = append(opts, headway.WithRetry(headway.RetryOptions{ProbeInterval: -1}))
	case cfg.Attempts > 0:
		opts = append(opts, headway.WithRetry(headway.RetryOptions{MaxAttempts: cfg.Attempts, MaxElapsed: -1}))
	}
	client := &http.Client{Transport: headway.New(base, opts...)}
	if cfg.Contender == "redis_rate" {
		client = &http.Client{Transport: &redisRateRT{
			base: base, l: redis_rate.NewLimiter(rdb), key: cfg.Prefix + ":redis_rate",
			lim: redis_rate.Limit{Rate: cfg.Rate, Burst: cfg.Burst, Period: time.Second},
		}}
	}

	time.Sleep(time.Until(cfg.Start))
	if cfg.Requests > 0 {
		return countedRun(cfg, client, q)
	}
	end := cfg.Start.Add(cfg.Duration)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	var res workerResult
	var ok, tooMany, errs, cut, held atomic.Int64
	var maxLive atomic.Int64
	var wg sync.WaitGroup
	if cfg.PauseAt > 0 && cfg.Index == 0 {
		wg.Go(func() {
			time.Sleep(time.Until(cfg.Start.Add(cfg.PauseAt)))
			called := time.Now()
			if q.Pause(context.Background(), fleetKey, cfg.Pause) == nil {
				res.PauseCalled, res.PausedAt = called, time.Now()
			}
		})
	}
	wg.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if n := int64(q.Live(fleetKey)); n > maxLive.Load() {
				maxLive.Store(n)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	closed := cfg.Goroutines
	if cfg.Offered > 0 {
		openLoop(ctx, cfg, client, &res)
		closed = 0
	}
	for range closed {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.URL+"/items/1", nil)
				req.Header.Set("X-Worker", strconv.Itoa(cfg.Index))
				resp, err := client.Do(req)
				var we *headway.WaitError
				switch {
				case err != nil && ctx.Err() == nil && errors.As(err, &we) && !we.NextProbe.IsZero():
					// The fleet holds the key for a host it reports
					// down: a stall some process saw (on a loaded
					// machine, an answer late by a few milliseconds on
					// loopback) holds until the next probe, but ends at
					// the stalled request's answer, usually far sooner.
					// Not the end of the run: try again a little later.
					held.Add(1)
					select {
					case <-ctx.Done():
					case <-time.After(10 * time.Millisecond):
					}
				case err != nil && (ctx.Err() != nil || errors.As(err, &we)):
					cut.Add(1) // its wait for a slot outlived the run: so will the next one's
					return
				case err != nil:
					errs.Add(1)
				default:
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusTooManyRequests {
						tooMany.Add(1)
					} else {
						ok.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	if cfg.Offered == 0 {
		res.OK, res.TooMany, res.Errors, res.Cut, res.Held = ok.Load(), tooMany.Load(), errs.Load(), cut.Load(), held.Load()
	}
	res.Stats = q.Stats()
	res.MaxLive = int(maxLive.Load())
	return res, nil
}

// countedRun sends cfg.Requests requests from cfg.Goroutines goroutines
// and reports when the last was answered.
func countedRun(cfg workerConfig, client *http.Client, q *Redis) (workerResult, error) {
	ctx, cancel := context.WithDeadline(context.Background(), cfg.Start.Add(cfg.Duration))
	defer cancel()
	var left, ok, tooMany, errs atomic.Int64
	left.Store(int64(cfg.Requests))
	var wg sync.WaitGroup
	for range cfg.Goroutines {
		wg.Go(func() {
			for left.Add(-1) >= 0 && ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.URL+"/items/1", nil)
				resp, err := client.Do(req)
				if err != nil {
					errs.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				// A refusal its retries did not get past (a 429, a 503,
				// GitHub's 403) is no answer.
				if resp.StatusCode != http.StatusOK {
					tooMany.Add(1)
				} else {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return workerResult{OK: ok.Load(), TooMany: tooMany.Load(), Errors: errs.Load(), Stats: q.Stats(), Done: time.Now()}, nil
}

// redisRateRT sends each request when go-redis/redis_rate allows it: the
// contender of the fleet benchmarks, used as its README shows.
type redisRateRT struct {
	base http.RoundTripper
	l    *redis_rate.Limiter
	key  string
	lim  redis_rate.Limit
}

func (t *redisRateRT) RoundTrip(req *http.Request) (*http.Response, error) {
	for {
		res, err := t.l.Allow(req.Context(), t.key, t.lim)
		if err != nil {
			return nil, err
		}
		if res.Allowed > 0 {
			return t.base.RoundTrip(req)
		}
		tm := time.NewTimer(res.RetryAfter)
		select {
		case <-tm.C:
		case <-req.Context().Done():
			tm.Stop()
			return nil, req.Context().Err()
		}
	}
}

// openLoop sends cfg.Offered requests a second until ctx ends, each with a
// deadline of cfg.ReqTimeout, and counts them in res.
func openLoop(ctx context.Context, cfg workerConfig, client *http.Client, res *workerResult) {
	half := cfg.Start.Add(cfg.Duration / 2)
	sem := make(chan struct{}, cfg.Goroutines)
	var ok, second, tooMany, errs, late, dropped, held atomic.Int64
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(cfg.Offered))
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			select {
			case sem <- struct{}{}:
			default:
				dropped.Add(1)
				continue
			}
			wg.Go(func() {
				defer func() { <-sem }()
				rctx, cancel := context.WithTimeout(ctx, cfg.ReqTimeout)
				defer cancel()
				req, _ := http.NewRequestWithContext(rctx, http.MethodGet, cfg.URL+"/items/1", nil)
				req.Header.Set("X-Worker", strconv.Itoa(cfg.Index))
				resp, err := client.Do(req)
				var we *headway.WaitError
				switch {
				case err != nil && rctx.Err() == nil && errors.As(err, &we) && !we.NextProbe.IsZero():
					late.Add(1)
					held.Add(1)
				case err != nil && (rctx.Err() != nil || errors.As(err, &we)):
					late.Add(1)
				case err != nil:
					errs.Add(1)
				default:
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					switch {
					case resp.StatusCode == http.StatusTooManyRequests:
						tooMany.Add(1)
					case time.Now().After(half):
						second.Add(1)
						ok.Add(1)
					default:
						ok.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	res.OK, res.SecondHalf, res.TooMany, res.Errors = ok.Load(), second.Load(), tooMany.Load(), errs.Load()
	res.Late, res.Dropped, res.Held = late.Load(), dropped.Load(), held.Load()
}

// runFleet runs n worker processes with cfg and returns their results.
func runFleet(t testing.TB, n int, cfg workerConfig) []workerResult {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmds := make([]*exec.Cmd, n)
	outs := make([]*limitedBuffer, n)
	for i := range n {
		c := cfg
		c.Index = i
		js, _ := json.Marshal(c)
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+string(js))
		outs[i] = &limitedBuffer{}
		cmd.Stdout = outs[i]
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	res := make([]workerResult, n)
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		if err := json.Unmarshal(outs[i].Bytes(), &res[i]); err != nil {
			t.Fatalf("worker %d: %v: %q", i, err, outs[i].Bytes())
		}
	}
	return res
}

type limitedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) < 1<<20 {
		b.buf = append(b.buf, p...)
	}
	return len(p), nil
}

func (b *limitedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf
}

func redisZ(member string, score float64) redis.Z { return redis.Z{Score: score, Member: member} }
