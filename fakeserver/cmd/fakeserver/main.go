// Command fakeserver runs a fake rate-limited HTTP API on a local port, for
// trying HTTP clients against it from another process.
//
// Usage:
//
//	go run ./fakeserver/cmd/fakeserver [flags]
//
// It prints its URL, then its counters every -stats-every and when it
// stops (on SIGINT or SIGTERM). The counters are also served as JSON at
// -stats-path (default /_stats), which is neither limited nor counted.
//
// Examples:
//
//	fakeserver -rate 50 -burst 10
//	fakeserver -algorithm sliding-window -rate 100 -window 1m -dialect ietf
//	fakeserver -dialect github -key header:Authorization -skew 3s
//	fakeserver -algorithm anchored-window -rate 5000 -window 1h -dialect github
//	fakeserver -algorithm sliding-window-counter -rate 100 -window 1m -skew 2s -drift -5ms
//	fakeserver -outage-after 10s -outage-for 5s -error-rate 0.05 -latency 20ms
//	fakeserver -outage-after 10s -outage-for 3s -outage-shape hang
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/headway-go/headway/fakeserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(2)
	}
}

// run parses args, serves until ctx is done, and prints to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fakeserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		addr      = fs.String("addr", "127.0.0.1:8080", "address to listen on")
		rate      = fs.Int("rate", 50, "requests admitted per -window, per key")
		window    = fs.Duration("window", time.Second, "the period of -rate")
		burst     = fs.Int("burst", 1, "bucket capacity for token-bucket and leaky-bucket")
		algorithm = fs.String("algorithm", "token-bucket", "token-bucket, leaky-bucket, fixed-window, sliding-window, sliding-window-counter or anchored-window")
		dialect   = fs.String("dialect", "retry-after", "rate-limit headers: "+strings.Join(fakeserver.DialectNames, ", "))
		skew      = fs.Duration("skew", 0, "offset of the server's clock in Date and absolute times")
		drift     = fs.Duration("drift", 0, "how much the server's clock gains each second (negative: loses), from its start")
		windowEnd = fs.Bool("reset-at-window-end", false, "sliding-window-counter: state the end of the present window as the reset, not when the quota is full again")
		key       = fs.String("key", "none", "what a limit applies to: none (one global limit), ip, or header:NAME")
		maxKeys   = fs.Int("max-keys", 100000, "most keys tracked at once")
		statsPath = fs.String("stats-path", fakeserver.DefaultStatsPath, "path of the JSON counters")
		every     = fs.Duration("stats-every", 0, "print the counters this often (0: only at exit)")

		outageAfter  = fs.Duration("outage-after", 0, "start an outage this long after start (with -outage-for)")
		outageFor    = fs.Duration("outage-for", 0, "length of the outage (0: none)")
		outageStatus = fs.Int("outage-status", 500, "status during the outage")
		outageShape  = fs.String("outage-shape", "error", "how the outage fails: error (-outage-status), reset, slow (-outage-status after -outage-delay) or hang")
		outageDelay  = fs.Duration("outage-delay", time.Second, "how long a slow outage's responses take")
		errorRate    = fs.Float64("error-rate", 0, "share of requests answered with -error-status at random")
		errorStatus  = fs.Int("error-status", 500, "status of random errors")
		resetRate    = fs.Float64("reset-rate", 0, "share of requests whose connection is reset")
		latency      = fs.Duration("latency", 0, "latency added to every response")
		jitter       = fs.Duration("jitter", 0, "random extra latency, up to this much")
		handshake    = fs.Duration("handshake", 0, "hold each of the first -handshakes requests up to this long before counting it, as opening connections does")
		handshakes   = fs.Int("handshakes", 0, "requests that -handshake holds")
		maxInFlight  = fs.Int("max-in-flight", 0, "requests of one key in progress at once, beyond which one is rejected (0: no bound)")
		seed         = fs.Uint64("seed", 1, "seed of the random faults")

		block         = fs.Duration("block", 0, "block a key this long after its limit rejects a request (0: none)")
		blockStates   = fs.String("block-states", "block-end", "what rejections during a block state: block-end, window or nothing")
		extend        = fs.Bool("extend", false, "each request during a block or ban restarts it")
		banAfter      = fs.Int("ban-after", 0, "ban a key after this many violations within -ban-span (0: none)")
		banSpan       = fs.Duration("ban-span", time.Minute, "the span -ban-after violations fall within")
		ban           = fs.Duration("ban", 5*time.Minute, "length of a ban")
		banStatus     = fs.Int("ban-status", 403, "status during a ban")
		banRetryAfter = fs.Bool("ban-retry-after", false, "state the ban's end in Retry-After")
		banBody       = fs.String("ban-body", "", "body of the answers during a ban (JSON)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("fakeserver: unexpected arguments %q", fs.Args())
	}
	alg, err := fakeserver.ParseAlgorithm(*algorithm)
	if err != nil {
		return err
	}
	d, err := fakeserver.DialectByName(*dialect)
	if err != nil {
		return err
	}
	keyFunc, err := parseKey(*key)
	if err != nil {
		return err
	}
	shape, err := fakeserver.ParseOutageShape(*outageShape)
	if err != nil {
		return err
	}
	states, err := fakeserver.ParseBlockStatement(*blockStates)
	if err != nil {
		return err
	}
	srv := fakeserver.New(fakeserver.Config{
		Algorithm:        alg,
		Limit:            *rate,
		Window:           *window,
		Burst:            *burst,
		ClockSkew:        *skew,
		ClockDrift:       *drift,
		ResetAtWindowEnd: *windowEnd,
		Key:              keyFunc,
		MaxKeys:          *maxKeys,
		MaxInFlight:      *maxInFlight,
		Dialect:          d,
		StatsPath:        *statsPath,
		Faults: fakeserver.Faults{
			Outage:       shape,
			OutageStatus: *outageStatus,
			OutageDelay:  *outageDelay,
			ErrorRate:    *errorRate,
			ErrorStatus:  *errorStatus,
			ResetRate:    *resetRate,
			Latency:      *latency,
			Jitter:       *jitter,
			Handshake:    *handshake,
			Handshakes:   *handshakes,
			Seed:         *seed,
		},
		Penalty: fakeserver.Penalty{
			Block: *block, BlockStates: states, Extend: *extend,
			BanAfter: *banAfter, BanSpan: *banSpan, Ban: *ban, BanStatus: *banStatus,
			BanRetryAfter: *banRetryAfter, BanBody: *banBody,
		},
	})
	if *outageFor > 0 {
		from := time.Now().Add(*outageAfter)
		srv.SetOutage(from, from.Add(*outageFor))
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("fakeserver: %w", err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	cfg := srv.Config()
	fmt.Fprintf(stdout, "fakeserver: %s, %d per %v (burst %d), dialect %s, listening on http://%s (stats at %s)\n",
		cfg.Algorithm, cfg.Limit, cfg.Window, cfg.Burst, *dialect, ln.Addr(), cfg.StatsPath)

	var tick <-chan time.Time
	if *every > 0 {
		t := time.NewTicker(*every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-tick:
			printStats(stdout, srv)
		case err := <-done:
			return fmt.Errorf("fakeserver: %w", err)
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := hs.Shutdown(sctx)
			<-done
			printStats(stdout, srv)
			return err
		}
	}
}

func printStats(w io.Writer, srv *fakeserver.Server) {
	st := srv.Stats()
	cfg := srv.Config()
	fmt.Fprintf(w, "fakeserver: total=%d admitted=%d rejected=%d early=%d outage=%d errors=%d resets=%d peak=%d/%v\n",
		st.Total, st.Admitted, st.Rejected, st.Early, st.Outage, st.Errors, st.Resets,
		srv.PeakRate(cfg.Window), cfg.Window)
}

func parseKey(s string) (func(*http.Request) string, error) {
	switch {
	case s == "none" || s == "":
		return nil, nil
	case s == "ip":
		return fakeserver.KeyByRemoteIP, nil
	case strings.HasPrefix(s, "header:") && len(s) > len("header:"):
		return fakeserver.KeyByHeader(s[len("header:"):]), nil
	}
	return nil, fmt.Errorf("fakeserver: bad -key %q (want none, ip or header:NAME)", s)
}
