package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/headway-go/headway/fakeserver"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestExportAgainstTheFakeServer runs a short export over real loopback:
// every record goes through exactly once. Whether a 429 comes back, and the
// rate reached, depend on real time and this machine's load: they are
// reported, and measured by running the command, not asserted here.
func TestExportAgainstTheFakeServer(t *testing.T) {
	sum, err := run(context.Background(), config{records: 100, rate: 50, burst: 10, workers: 32, progress: "lines"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 100 || sum.Failed != 0 {
		t.Errorf("exported %d, failed %d; want 100, 0", sum.Records, sum.Failed)
	}
	st := sum.ServerStats
	if st == nil || st.Admitted != 100 {
		t.Fatalf("server saw %+v, want 100 admitted", st)
	}
	t.Logf("%.1f/s against 50/s, %d 429s, %d retries", sum.Rate, sum.TooMany, sum.Retries)
}

// TestMetricsAreServed runs a short export with metrics served on a free
// port: the Prometheus page shows headway's counters.
func TestMetricsAreServed(t *testing.T) {
	mp, addr, stop, err := serveMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	scrape := func() string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	var (
		sum    summary
		runErr error
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		sum, runErr = run(context.Background(), config{records: 50, rate: 50, burst: 10, workers: 4, progress: "lines", mp: mp}, io.Discard)
	}()
	// The gauges are read from the Transport while it lives: scrape while
	// the export runs, as Prometheus would. (Once run returns, its
	// Transport may be garbage collected, and its gauges go with it.)
	var during string
scraping:
	for {
		select {
		case <-done:
			break scraping
		default:
		}
		if page := scrape(); strings.Contains(page, "headway_queue_length") {
			during = page
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	<-done
	if runErr != nil || sum.Records != 50 {
		t.Fatalf("exported %d: %v", sum.Records, runErr)
	}
	if during == "" {
		t.Error("the metrics page lacked headway_queue_length while exporting")
	}
	page := scrape()
	for _, want := range []string{
		`headway_requests_total{otel_scope_name="github.com/headway-go/headway"`,
		`outcome="sent"`,
		"headway_queue_wait_seconds_bucket",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the metrics page lacks %s", want)
		}
	}
	if t.Failed() {
		t.Log(page)
	}
}

// Bad flags get a clear error, before anything is sent (issue 9, item 7).
func TestBadFlagsAreRejected(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-burst", "0"}, "-burst must be positive"},
		{[]string{"-burst", "-5"}, "-burst must be positive"},
		{[]string{"-progress", "nonsense"}, "-progress must be bar, lines or auto"},
		{[]string{"-url", "://bad"}, "-url"},
		{[]string{"-url", "api.example.com"}, "-url must be an absolute http or https URL"},
		{[]string{"-n", "0"}, "-n must be positive"},
		{[]string{"-grace", "-1s"}, "-grace must not be negative"},
		{[]string{"extra"}, "unexpected argument"},
	} {
		_, err := parseFlags(c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error with %q", c.args, err, c.want)
		}
	}
	if cfg, err := parseFlags(nil, io.Discard); err != nil || cfg.records != 2000 || cfg.burst != 10 {
		t.Errorf("the defaults: %+v, %v", cfg, err)
	}
}

// Progress counts the records exported, not those that failed.
func TestProgressCountsSuccesses(t *testing.T) {
	fs, err := fakeserver.Start(fakeserver.Config{Limit: 1000, Burst: 100,
		Faults: fakeserver.Faults{ErrorRate: 1, ErrorStatus: http.StatusBadRequest}})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	var out strings.Builder
	sum, err := run(context.Background(), config{records: 5, rate: 1000, burst: 100, workers: 2, progress: "lines", url: fs.URL}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 0 || sum.Failed != 5 {
		t.Errorf("exported %d, failed %d; want 0, 5", sum.Records, sum.Failed)
	}
	if !strings.Contains(out.String(), "exported 0/5 records") {
		t.Errorf("progress says %q, want exported 0/5", out.String())
	}
}

// On an interrupt the export stops sending, lets the requests in flight
// finish, and returns its summary: every record is exported, failed or not
// attempted, and none in flight is cut off.
func TestAnInterruptEndsWithTheSummary(t *testing.T) {
	fs, err := fakeserver.Start(fakeserver.Config{Limit: 20, Burst: 5,
		Faults: fakeserver.Faults{Latency: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	const n = 200
	sum, err := run(ctx, config{records: n, rate: 20, burst: 5, workers: 16, progress: "lines", url: fs.URL, grace: time.Minute}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", sum)
	if !sum.Interrupted {
		t.Error("not reported as interrupted")
	}
	if got := int64(sum.Records) + sum.Failed + int64(sum.NotAttempted); got != n {
		t.Errorf("exported %d + failed %d + not attempted %d = %d, want %d", sum.Records, sum.Failed, sum.NotAttempted, got, n)
	}
	if sum.Failed != 0 {
		t.Errorf("%d requests in flight were cut off", sum.Failed)
	}
	if st := sum.ServerStats; st == nil || st.Admitted != int64(sum.Records) {
		t.Errorf("the server admitted %+v, want %d", st, sum.Records)
	}
	if sum.NotAttempted == 0 {
		t.Error("the export did not stop sending")
	}
	var out strings.Builder
	printSummary(&out, sum)
	if !strings.Contains(out.String(), "not attempted") || !strings.Contains(out.String(), "interrupted") {
		t.Errorf("the summary says %q", out.String())
	}
}
