package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

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
	sum, err := run(context.Background(), config{records: 20, rate: 50, burst: 10, workers: 4, progress: "lines", mp: mp}, io.Discard)
	if err != nil || sum.Records != 20 {
		t.Fatalf("exported %d: %v", sum.Records, err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	for _, want := range []string{
		`headway_requests_total{otel_scope_name="github.com/headway-go/headway"`,
		`outcome="sent"`,
		"headway_queue_wait_seconds_bucket",
		"headway_queue_length",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the metrics page lacks %s", want)
		}
	}
	if t.Failed() {
		t.Log(page)
	}
}
