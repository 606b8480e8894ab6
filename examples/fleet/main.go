// Command fleet runs three worker processes that call one rate-limited API
// with one token, sharing one quota through Redis with headway's
// sharedquota package: together they keep to the API's limit, and get no
// 429s.
//
//	go run ./examples/fleet
//
// Its flags play the other cases of a fleet: -requests sends a fixed
// number of requests and reports the efficiency (the least time the API
// allows over the time taken); -dialect picks the API's rate-limit headers
// (ietf, bare, retry-after, github, ...); -no-limit configures no limit, so
// that the workers pace by what the API says (and share what they learn);
// -latency is the API's service time. Issue 10's case:
//
//	go run ./examples/fleet -workers 4 -goroutines 2 -requests 80 \
//		-rate 20 -burst 10 -dialect ietf -latency 20ms [-no-limit]
//
// It uses the Redis at REDIS_ADDR if set; otherwise it starts its own
// redis-server (which must be on PATH) on a free loopback port, and stops
// it at the end. It starts the bundled fake API in-process (100 requests a
// second, burst 10), then starts itself again three times as workers of 16
// goroutines each. It ends with a summary: what each worker sent, the
// aggregate rate against the limit, the server's peak in any second, and
// the 429s. It exits with status 1 if a 429 came back.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
	"github.com/headway-go/headway/sharedquota"
	"github.com/redis/go-redis/v9"
)

type config struct {
	worker     int // -1 in the parent
	workers    int
	goroutines int
	rate       int
	burst      int
	duration   time.Duration
	url        string
	redis      string
	prefix     string
	start      int64 // Unix ns at which every worker begins
	requests   int   // in all; 0: send for duration
	dialect    string
	latency    time.Duration
	noLimit    bool
}

// result is what one worker reports on its stdout.
type result struct {
	OK, TooMany, Failed int64
	Stats               sharedquota.Stats
	Done                int64 // Unix ns of the last answer
}

func main() {
	var cfg config
	flag.IntVar(&cfg.worker, "worker", -1, "run as worker number N (used by the example itself)")
	flag.IntVar(&cfg.workers, "workers", 3, "worker processes")
	flag.IntVar(&cfg.goroutines, "goroutines", 16, "goroutines per worker")
	flag.IntVar(&cfg.rate, "rate", 100, "the API's limit, in requests per second")
	flag.IntVar(&cfg.burst, "burst", 10, "the API's burst")
	flag.DurationVar(&cfg.duration, "duration", 5*time.Second, "how long the workers send")
	flag.StringVar(&cfg.url, "url", "", "the API's base URL (set by the parent)")
	flag.StringVar(&cfg.redis, "redis", "", "Redis address (set by the parent)")
	flag.StringVar(&cfg.prefix, "prefix", "headway-fleet", "prefix of the Redis keys")
	flag.Int64Var(&cfg.start, "start", 0, "Unix ns at which to begin (set by the parent)")
	flag.IntVar(&cfg.requests, "requests", 0, "requests to send in all, then stop (0: send for -duration)")
	flag.StringVar(&cfg.dialect, "dialect", "retry-after", "the API's rate-limit headers: bare, retry-after, ietf, ietf-06, github, openai, ...")
	flag.DurationVar(&cfg.latency, "latency", 0, "the API's service time")
	flag.BoolVar(&cfg.noLimit, "no-limit", false, "configure no limit: pace by what the API says")
	flag.Parse()
	log.SetFlags(0)
	if cfg.workers < 1 || cfg.goroutines < 1 || cfg.rate < 1 || cfg.burst < 1 || cfg.requests < 0 || cfg.duration <= 0 || cfg.latency < 0 {
		log.Fatal("fleet: -workers, -goroutines, -rate, -burst and -duration must be positive, -requests and -latency not negative")
	}
	if cfg.worker >= 0 {
		res, err := work(cfg)
		if err != nil {
			log.Fatalf("fleet worker %d: %v", cfg.worker, err)
		}
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	if err := run(cfg); err != nil {
		log.Fatalf("fleet: %v", err) // after run's deferred calls stopped Redis
	}
}

func run(cfg config) error {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		a, stop, err := startRedis()
		if err != nil {
			return err
		}
		defer stop()
		addr = a
		fmt.Printf("started redis-server on %s\n", addr)
	}
	dialect, err := fakeserver.DialectByName(cfg.dialect)
	if err != nil {
		return err
	}
	fs, err := fakeserver.Start(fakeserver.Config{
		Limit: cfg.rate, Window: time.Second, Burst: cfg.burst, Dialect: dialect,
		Faults: fakeserver.Faults{Latency: cfg.latency},
	})
	if err != nil {
		return err
	}
	defer fs.Close()

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	start := time.Now().Add(time.Second)
	results := make([]result, cfg.workers)
	errs := make([]error, cfg.workers)
	var wg sync.WaitGroup
	for i := range cfg.workers {
		reqs := cfg.requests / cfg.workers
		if i < cfg.requests%cfg.workers {
			reqs++
		}
		cmd := exec.Command(exe,
			"-worker", strconv.Itoa(i),
			"-requests", strconv.Itoa(reqs), "-no-limit="+strconv.FormatBool(cfg.noLimit),
			"-goroutines", strconv.Itoa(cfg.goroutines),
			"-rate", strconv.Itoa(cfg.rate), "-burst", strconv.Itoa(cfg.burst),
			"-duration", cfg.duration.String(),
			"-url", fs.URL, "-redis", addr,
			"-prefix", cfg.prefix+"-"+hex.EncodeToString(suffix[:]),
			"-start", strconv.FormatInt(start.UnixNano(), 10))
		cmd.Stderr = os.Stderr
		wg.Go(func() {
			out, err := cmd.Output()
			if err == nil {
				err = json.Unmarshal(out, &results[i])
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	st := fs.Server.Stats()
	var ok, tooMany, done int64
	for i, r := range results {
		fmt.Printf("worker %d: %d requests sent, %d 429s; %d reservations, %d Redis round trips, %d decided without Redis\n",
			i, r.OK+r.TooMany, r.TooMany, r.Stats.Reservations, r.Stats.RoundTrips, r.Stats.Degraded)
		ok += r.OK
		tooMany += r.TooMany
		done = max(done, r.Done)
	}
	if cfg.requests > 0 {
		took := time.Unix(0, done).Sub(start)
		least := time.Duration(float64(max(cfg.requests-cfg.burst, 0))/float64(cfg.rate)*float64(time.Second)) + cfg.latency
		fmt.Printf("efficiency:  %.3f (%d requests in %v; the API allows them in %v at the least)\n",
			least.Seconds()/took.Seconds(), cfg.requests, took.Round(time.Millisecond), least.Round(time.Millisecond))
		fmt.Printf("throttled:   %d by the server, %d sent during a pause it had announced, %d handed back as 429s\n",
			st.Rejected, st.Early, tooMany)
		return nil
	}
	rate := float64(st.Admitted-int64(cfg.burst)) / cfg.duration.Seconds()
	fmt.Printf("aggregate:   %d requests in %v: %.1f/s after the burst, limit %d/s (%+.1f%%)\n",
		st.Admitted, cfg.duration, rate, cfg.rate, 100*(rate-float64(cfg.rate))/float64(cfg.rate))
	fmt.Printf("server peak: %d in any 1s window (limit %d, burst %d)\n", fs.Server.PeakRate(time.Second), cfg.rate, cfg.burst)
	fmt.Printf("429s:        %d (server rejected %d)\n", tooMany, st.Rejected)
	if tooMany > 0 || st.Rejected > 0 {
		return errThrottled
	}
	return nil
}

var errThrottled = errors.New("the API throttled the fleet")

// work is one worker process: its goroutines call the API until the run
// ends, through a headway Transport whose quota is shared in Redis.
func work(cfg config) (result, error) {
	rdb := redis.NewClient(&redis.Options{Addr: cfg.redis, ContextTimeoutEnabled: true})
	defer rdb.Close()
	q := sharedquota.NewRedis(rdb, sharedquota.WithPrefix(cfg.prefix))
	defer q.Close()
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = cfg.goroutines
	defer base.CloseIdleConnections()
	opts := []headway.Option{
		headway.WithKey(func(*http.Request) string { return "the-api-token" }), // one quota: the token's
		headway.WithSharedQuota(q),
	}
	if !cfg.noLimit {
		// The client's burst is a little below the server's: the headroom
		// absorbs network jitter between the processes.
		opts = append(opts, headway.WithLimit(headway.PerSecond(cfg.rate).WithBurst(max(cfg.burst-2, 1))))
	}
	client := &http.Client{Transport: headway.New(base, opts...)}

	start := time.Unix(0, cfg.start)
	time.Sleep(time.Until(start))
	end := start.Add(cfg.duration)
	if cfg.requests > 0 {
		end = start.Add(time.Hour) // the count ends the run
	}
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	var ok, tooMany, failed, left atomic.Int64
	left.Store(int64(cfg.requests))
	var wg sync.WaitGroup
	for range cfg.goroutines {
		wg.Go(func() {
			for ctx.Err() == nil && (cfg.requests == 0 || left.Add(-1) >= 0) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.url+"/items/1", nil)
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil && !errors.As(err, new(*headway.WaitError)) {
						failed.Add(1)
					}
					return // the run is over
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests {
					tooMany.Add(1)
				} else {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return result{OK: ok.Load(), TooMany: tooMany.Load(), Failed: failed.Load(), Stats: q.Stats(), Done: time.Now().UnixNano()}, nil
}

// startRedis starts redis-server on a free loopback port, without
// persistence, and returns its address and a function that stops it.
func startRedis() (string, func(), error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, errors.New("this example needs Redis: set REDIS_ADDR to a Redis address, or install redis-server (apt-get install redis-server) so that it is on PATH")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir, err := os.MkdirTemp("", "fleet-redis-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		os.RemoveAll(dir)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for deadline := time.Now().Add(5 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return addr, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("redis-server on %s does not answer: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
