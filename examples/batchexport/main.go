// Command batchexport exports records to a rate-limited API through
// headway, the way a batch job would: many workers, one shared limit, no
// 429s.
//
// By default it starts the bundled fake API in-process (50 requests a
// second, burst 10) and exports 2,000 records to it with 32 workers:
//
//	go run ./examples/batchexport
//
// Aim it at a fake server started on its own with -url:
//
//	go run ./fakeserver/cmd/fakeserver -addr 127.0.0.1:8080 -rate 50 -burst 10 &
//	go run ./examples/batchexport -url http://127.0.0.1:8080
//
// With -metrics ADDR it serves headway's OpenTelemetry metrics in the
// Prometheus exposition format at http://ADDR/metrics while it runs,
// through the OpenTelemetry Prometheus exporter:
//
//	go run ./examples/batchexport -metrics 127.0.0.1:9464 &
//	curl -s http://127.0.0.1:9464/metrics | grep headway_
//
// It ends with a summary: records exported, failed and not attempted,
// elapsed time, the rate achieved after the initial burst against the
// limit, the 429s received and the retries. It exits with status 1 if a
// record could not be exported or a 429 came back.
//
// On Ctrl-C (SIGINT) it stops sending: records not yet sent, and requests
// still waiting in headway's queue, are not attempted; requests already
// sent are let finish, for -grace at most. It then prints the summary and
// exits with status 130. A second Ctrl-C ends it at once.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/schollz/progressbar/v3"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"golang.org/x/term"
)

type config struct {
	records  int
	rate     int
	burst    int
	workers  int
	url      string
	progress string
	grace    time.Duration        // how long requests in flight may finish after an interrupt
	metrics  string               // -metrics: where to serve them; empty: nowhere
	mp       metric.MeterProvider // headway reports to it; nil: no metrics
}

// parseFlags reads the command line args (without the program name) into a
// config, and checks it.
func parseFlags(args []string, out io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("batchexport", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&cfg.records, "n", 2000, "number of records to export")
	fs.IntVar(&cfg.rate, "rate", 50, "the API's limit, in requests per second")
	fs.IntVar(&cfg.burst, "burst", 10, "the API's burst")
	fs.IntVar(&cfg.workers, "workers", 32, "concurrent workers")
	fs.StringVar(&cfg.url, "url", "", "base URL of an external API (default: start the fake API in-process)")
	fs.StringVar(&cfg.progress, "progress", "auto", "progress display: bar, lines or auto (a bar on a terminal)")
	fs.DurationVar(&cfg.grace, "grace", 10*time.Second, "on Ctrl-C, how long requests already sent may take to finish")
	fs.StringVar(&cfg.metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics while exporting (default: none)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return cfg, cfg.check()
}

// check reports the first invalid setting of cfg.
func (cfg config) check() error {
	switch {
	case cfg.records <= 0:
		return fmt.Errorf("-n must be positive, not %d", cfg.records)
	case cfg.rate <= 0:
		return fmt.Errorf("-rate must be positive, not %d", cfg.rate)
	case cfg.burst <= 0:
		return fmt.Errorf("-burst must be positive, not %d", cfg.burst)
	case cfg.workers <= 0:
		return fmt.Errorf("-workers must be positive, not %d", cfg.workers)
	case cfg.grace < 0:
		return fmt.Errorf("-grace must not be negative, not %v", cfg.grace)
	}
	switch cfg.progress {
	case "auto", "bar", "lines":
	default:
		return fmt.Errorf("-progress must be bar, lines or auto, not %q", cfg.progress)
	}
	if cfg.url != "" {
		u, err := url.Parse(cfg.url)
		if err != nil {
			return fmt.Errorf("-url: %v", err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("-url must be an absolute http or https URL, not %q", cfg.url)
		}
	}
	return nil
}

// summary is what one export did.
type summary struct {
	Records      int   // exported
	Failed       int64 // sent at least once, and not exported
	NotAttempted int   // never sent: the export was interrupted first
	Interrupted  bool  // the export stopped early, on Ctrl-C
	Elapsed      time.Duration
	Rate         float64      // achieved after the initial burst, per second
	Limit        int          // per second
	TooMany      int64        // 429s received
	Retries      int64        // requests headway sent again, and records the export sent again
	Throttled    int64        // throttled responses headway received
	ServerStats  *serverStats // nil when the server gave none
}

// serverStats is the part of the fake server's /_stats JSON this example
// reads.
type serverStats struct {
	Admitted int64 `json:"admitted"`
	Rejected int64 `json:"rejected"`
	Early    int64 `json:"early"`
	Peak     int   `json:"peak"`
}

func main() {
	log.SetFlags(0)
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		log.Printf("batchexport: %v", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	context.AfterFunc(ctx, stop) // a second Ctrl-C ends the program at once
	if cfg.metrics != "" {
		mp, addr, stopMetrics, err := serveMetrics(cfg.metrics)
		if err != nil {
			log.Fatalf("batchexport: %v", err)
		}
		defer stopMetrics()
		cfg.mp = mp
		fmt.Fprintf(os.Stderr, "metrics at http://%s/metrics\n", addr)
	}
	sum, err := run(ctx, cfg, os.Stderr)
	if err != nil {
		log.Fatalf("batchexport: %v", err)
	}
	printSummary(os.Stdout, sum)
	switch {
	case sum.Interrupted:
		os.Exit(130)
	case sum.Failed > 0 || sum.TooMany > 0:
		os.Exit(1)
	}
}

// run exports cfg.records records, until they are all sent or ctx ends.
// When ctx ends it sends nothing more, lets the requests already sent
// finish (for cfg.grace at most) and returns the summary of what was done;
// it fails only when the export cannot start.
func run(ctx context.Context, cfg config, progressOut io.Writer) (summary, error) {
	if err := cfg.check(); err != nil {
		return summary{}, err
	}
	base := cfg.url
	if base == "" {
		fs, err := fakeserver.Start(fakeserver.Config{Limit: cfg.rate, Window: time.Second, Burst: cfg.burst})
		if err != nil {
			return summary{}, err
		}
		defer fs.Close()
		base = fs.URL
	}

	// Pace to the API's published limit, with a burst a little below the
	// server's: the requests of headroom absorb the jitter of the network
	// and of a loaded machine (a request can reach the server sooner than
	// the one sent before it), at no cost to the steady rate.
	limit := headway.PerSecond(cfg.rate).WithBurst(clientBurst(cfg.burst))
	httpTransport := http.DefaultTransport.(*http.Transport).Clone()
	httpTransport.MaxIdleConnsPerHost = cfg.workers
	// The hooks count what the Transport did itself: every throttled
	// response, retried or not, and the requests it sent again.
	var throttled, hwRetries atomic.Int64
	opts := []headway.Option{
		headway.WithLimit(limit),
		headway.WithHooks(headway.Hooks{
			OnThrottle: func(headway.ThrottleEvent) { throttled.Add(1) },
			OnRetry:    func(headway.RetryEvent) { hwRetries.Add(1) },
		}),
	}
	if cfg.mp != nil {
		opts = append(opts, headway.WithMeterProvider(cfg.mp))
	}
	hw := headway.New(httpTransport, opts...)
	client := &http.Client{Transport: hw, Timeout: time.Minute}
	defer httpTransport.CloseIdleConnections()

	// Requests live on work, not ctx: on an interrupt those already sent
	// may finish, for cfg.grace at most, while those still waiting for
	// their turn are abandoned (see attempt).
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stopGrace := context.AfterFunc(ctx, func() {
		time.AfterFunc(cfg.grace, cancelWork)
	})
	defer stopGrace()

	before, _ := fetchStats(work, client, base)
	bar := newProgress(cfg, progressOut)
	var (
		retries, failed atomic.Int64
		notAttempted    atomic.Int64
		mu              sync.Mutex
		first, last     time.Time
		sent            int
	)
	record := func(at time.Time) {
		mu.Lock()
		defer mu.Unlock()
		if sent == 0 || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
		sent++
	}
	// export sends record id, and reports whether it was exported.
	export := func(id int) bool {
		body, _ := json.Marshal(map[string]any{"id": id, "name": "record-" + strconv.Itoa(id)})
		for attempt := 1; ; attempt++ {
			ok, sent := attemptOnce(ctx, work, client, base+"/records", body)
			switch {
			case ok:
				record(time.Now())
				return true
			case !sent && attempt == 1:
				notAttempted.Add(1) // interrupted before it left
				return false
			case attempt == 3 || ctx.Err() != nil:
				failed.Add(1)
				return false
			}
			retries.Add(1)
		}
	}

	start := time.Now()
	ids := make(chan int)
	var wg sync.WaitGroup
	for range cfg.workers {
		wg.Go(func() {
			for id := range ids {
				if export(id) {
					bar.Add(1) // progress counts records exported
				}
			}
		})
	}
	fed := 0
feed:
	for ; fed < cfg.records; fed++ {
		select {
		case ids <- fed:
		case <-ctx.Done():
			break feed
		}
	}
	close(ids)
	wg.Wait()
	bar.Finish()

	sum := summary{
		Records:      sent,
		Failed:       failed.Load(),
		NotAttempted: cfg.records - fed + int(notAttempted.Load()),
		Interrupted:  ctx.Err() != nil,
		Elapsed:      time.Since(start),
		Limit:        cfg.rate,
		TooMany:      throttled.Load(), // every throttled response, retried or not
		Retries:      retries.Load() + hwRetries.Load(),
	}
	// The rate after the initial burst: the requests after the burst over
	// the time between the first and the last response.
	if b := clientBurst(cfg.burst); sent > b && last.After(first) {
		sum.Rate = float64(sent-b) / last.Sub(first).Seconds()
	}
	statsCtx, cancelStats := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancelStats()
	if after, err := fetchStats(statsCtx, client, base); err == nil {
		if before != nil {
			after.Admitted -= before.Admitted
			after.Rejected -= before.Rejected
			after.Early -= before.Early
		}
		sum.ServerStats = after
	}
	return sum, nil
}

// attemptOnce posts body to url once. Its request is abandoned, unsent, if
// stop ends while it still waits for its turn in headway's queue; once
// sent, it lives until work ends. ok reports a 2xx response; sent, that the
// request left for the server.
func attemptOnce(stop, work context.Context, client *http.Client, url string, body []byte) (ok, sent bool) {
	const waiting, left, abandoned = 0, 1, 2
	var state atomic.Int32
	reqCtx, cancel := context.WithCancel(work)
	defer cancel()
	release := context.AfterFunc(stop, func() {
		if state.CompareAndSwap(waiting, abandoned) {
			cancel()
		}
	})
	defer release()
	trace := &httptrace.ClientTrace{GetConn: func(string) { state.CompareAndSwap(waiting, left) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(reqCtx, trace), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false, true // cannot be sent: a failure, not an interruption
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return false, state.Load() != abandoned
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode < 300, true
}

// serveMetrics serves, at http://addr/metrics, the metrics reported to the
// MeterProvider it returns, in the Prometheus exposition format, until
// stop is called. It returns the address it listens on.
func serveMetrics(addr string) (mp *sdkmetric.MeterProvider, at string, stop func(), err error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, "", nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	return mp, ln.Addr().String(), func() {
		srv.Close()
		<-done
		_ = mp.Shutdown(context.Background())
	}, nil
}

// clientBurst is the client's burst for a server whose burst is b: a
// quarter of it (at least one request, if b allows) kept back for jitter.
func clientBurst(b int) int {
	return max(b-max(b/4, 1), 1)
}

// fetchStats reads the fake server's counters, if the server has them.
func fetchStats(ctx context.Context, client *http.Client, base string) (*serverStats, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+fakeserver.DefaultStatsPath+"?window=1s", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("stats: %s", resp.Status)
	}
	var st serverStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, err
	}
	return &st, nil
}

func printSummary(w io.Writer, s summary) {
	if s.Interrupted {
		fmt.Fprintln(w, "interrupted:      stopped sending on Ctrl-C")
	}
	fmt.Fprintf(w, "records exported: %d (failed: %d, not attempted: %d)\n", s.Records, s.Failed, s.NotAttempted)
	fmt.Fprintf(w, "elapsed:          %v\n", s.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "achieved rate:    %.2f/s after the burst, limit %d/s (%+.2f%%)\n",
		s.Rate, s.Limit, 100*(s.Rate-float64(s.Limit))/float64(s.Limit))
	fmt.Fprintf(w, "429s received:    %d\n", s.TooMany)
	fmt.Fprintf(w, "retries:          %d\n", s.Retries)
	if st := s.ServerStats; st != nil {
		fmt.Fprintf(w, "server saw:       %d admitted, %d rejected, %d early, peak %d in any 1s window\n",
			st.Admitted, st.Rejected, st.Early, st.Peak)
	}
}

// progress is a progress bar on a terminal, and a line every few seconds
// elsewhere.
type progress interface {
	Add(int) error
	Finish() error
}

func newProgress(cfg config, out io.Writer) progress {
	mode := cfg.progress
	if mode == "auto" {
		mode = "lines"
		if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			mode = "bar"
		}
	}
	if mode == "bar" {
		return progressbar.NewOptions(cfg.records,
			progressbar.OptionSetWriter(out),
			progressbar.OptionSetDescription("exporting"),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("records"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(out) }),
		)
	}
	return &lines{out: out, total: cfg.records, start: time.Now(), every: 5 * time.Second}
}

// lines reports progress as plain lines, at most one per interval.
type lines struct {
	mu    sync.Mutex
	out   io.Writer
	total int
	done  int
	start time.Time
	next  time.Time
	every time.Duration
}

func (l *lines) Add(n int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done += n
	if now := time.Now(); now.After(l.next) && l.done < l.total {
		if !l.next.IsZero() {
			fmt.Fprintf(l.out, "exported %d/%d records in %v\n", l.done, l.total, now.Sub(l.start).Round(time.Second))
		}
		l.next = now.Add(l.every)
	}
	return nil
}

func (l *lines) Finish() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, "exported %d/%d records in %v\n", l.done, l.total, time.Since(l.start).Round(time.Millisecond))
	return nil
}
