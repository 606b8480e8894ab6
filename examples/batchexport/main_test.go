package main

import (
	"context"
	"io"
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
