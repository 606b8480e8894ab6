package bench

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	outage     = flag.Bool("outage", false, "run the outage rows over loopback, in real time (minutes)")
	outageRuns = flag.Int("outage-runs", 5, "runs of headway per outage shape, for the spread of its numbers")
	outageFor  = flag.Duration("outage-for", 0, "the outage's length; 0 means DefaultOutage's (3s)")
)

// outageScenario is DefaultOutage, its length set by -outage-for.
func outageScenario() OutageScenario {
	s := DefaultOutage
	if *outageFor > 0 {
		s.For = *outageFor
	}
	return s
}

// TestOutageTable runs every outage contender through every outage shape
// over loopback, in real time, and prints the table; with -write it puts
// it in BENCHMARKS.md, between the outage markers:
//
//	go test -run TestOutageTable -v -outage -write
func TestOutageTable(t *testing.T) {
	if !*outage {
		t.Skip("real time, minutes: run with -outage")
	}
	s := outageScenario()
	began := time.Now()
	var results []OutageResult
	var spread strings.Builder
	for _, sh := range OutageShapes {
		for _, c := range OutageContenders {
			r, err := RunOutage(c, sh, s)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s / %s: efficiency %.3f, %d into the outage, %d failed", sh.Name, c.Name, r.Efficiency(), r.IntoOutage, r.Failed)
			results = append(results, r)
		}
		// headway again, for the spread of its numbers: the probes are not
		// jittered, but the loopback's timing varies from run to run.
		runs := []OutageResult{results[len(results)-len(OutageContenders)]}
		for range *outageRuns - 1 {
			r, err := RunOutage(OutageContenders[0], sh, s)
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, r)
		}
		spread.WriteString(Spread(sh.Name, runs))
	}
	took := time.Since(began)
	table := OutageTable(results)
	fmt.Print(table, "\n", spread.String())
	if *write {
		doc, err := os.ReadFile("../BENCHMARKS.md")
		if err != nil {
			t.Fatal(err)
		}
		sec := OutageReport(table, spread.String(), s, CurrentMachine(), took)
		if err := os.WriteFile("../BENCHMARKS.md", []byte(WithOutageSection(string(doc), sec)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Spread sums up several runs of one contender in one shape.
func Spread(shape string, runs []OutageResult) string {
	var eff []float64
	var into, attempts, failed []int64
	var resume []time.Duration
	for _, r := range runs {
		eff = append(eff, r.Efficiency())
		into = append(into, r.IntoOutage)
		attempts = append(attempts, r.Attempts)
		failed = append(failed, int64(r.Failed))
		resume = append(resume, r.Resume)
	}
	slices.Sort(eff)
	slices.Sort(into)
	slices.Sort(attempts)
	slices.Sort(resume)
	return fmt.Sprintf("- %s, %d runs of headway: efficiency %.3f to %.3f (median %.3f); sent into the outage %d to %d (server), %d to %d (client); failed %d in all; first success %d to %d ms after it\n",
		shape, len(runs), eff[0], eff[len(eff)-1], eff[len(eff)/2], into[0], into[len(into)-1], attempts[0], attempts[len(attempts)-1],
		sum(failed), resume[0].Milliseconds(), resume[len(resume)-1].Milliseconds())
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

// BenchmarkOutage runs headway alone through each outage shape over
// loopback, once per iteration, and reports the numbers; with
// -outage-for, through an outage of another length:
//
//	go test -run XXX -bench Outage -benchtime 1x [-outage-for 5s]
func BenchmarkOutage(b *testing.B) {
	for _, sh := range OutageShapes {
		b.Run(strings.ReplaceAll(sh.Name, " ", "-"), func(b *testing.B) {
			var eff, into, attempts, failed, resume float64
			var r OutageResult
			for range b.N {
				var err error
				if r, err = RunOutage(OutageContenders[0], sh, outageScenario()); err != nil {
					b.Fatal(err)
				}
				eff += r.Efficiency()
				into += float64(r.IntoOutage)
				attempts += float64(r.Attempts)
				failed += float64(r.Failed)
				resume += float64(r.Resume.Milliseconds())
			}
			n := float64(b.N)
			b.ReportMetric(eff/n, "efficiency")
			b.ReportMetric(into/n, "into-outage")
			b.ReportMetric(attempts/n, "client-attempts")
			b.ReportMetric(failed/n, "failed")
			b.ReportMetric(resume/n, "resume-ms")
		})
	}
}

func TestOutageLeast(t *testing.T) {
	s := DefaultOutage
	if got, want := s.Least(s.N), 3*time.Second+5800*time.Millisecond; got != want {
		t.Errorf("Least(%d) = %v, want %v", s.N, got, want)
	}
	// 210 fit before the outage: the burst at once, 200 in 2 s.
	if got := s.Least(210); got != 2*time.Second {
		t.Errorf("Least(210) = %v, want 2s", got)
	}
	r := OutageResult{Scenario: s, OK: 210, Failed: 390, Elapsed: 2 * time.Second}
	if eff := r.Efficiency(); eff > 0.36 || eff < 0.34 {
		t.Errorf("a client that failed 390 requests by 2 s: efficiency %.3f, want 210/600", eff)
	}
}

func TestOutageSectionIsKept(t *testing.T) {
	doc := "# Benchmarks\n\nthe dialect table\n"
	withSec := WithOutageSection(doc, "## Outages\n\nrows v1\n")
	if got := OutageSection(withSec); !strings.Contains(got, "rows v1") || !strings.HasPrefix(got, outageBegin) {
		t.Fatalf("section not found in %q", withSec)
	}
	again := WithOutageSection(withSec, "## Outages\n\nrows v2\n")
	if strings.Contains(again, "rows v1") || !strings.Contains(again, "rows v2") || strings.Count(again, outageBegin) != 1 {
		t.Errorf("the section is not replaced: %q", again)
	}
	if OutageSection(doc) != "" {
		t.Error("a document without the markers has no section")
	}
}
