package headway

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// TestAimdBounds sends a cycle to a token bucket, full when it begins, at
// a pace that climbs from under its rate to over it, until the bucket
// first refuses one, and holds the rate that aimd.bounds finds for the
// cycle's departures to the bucket's: at least the least, under the most
// (when it names one), the least within 2 % (5 % when slow start's pace
// doubles a second past 5/s), and the most within 2 % for a bucket of one
// request at a pace that climbs slowly, 15 % in slow start. The cycles are
// long enough (up to 470 departures) for the marks to thin out four times.
func TestAimdBounds(t *testing.T) {
	for _, c := range []struct {
		rate, burst float64
		from, climb float64 // the pace: from×rate, times 1+climb a second
		loTo, hiTo  float64 // the least within loTo of the rate, the most within hiTo; 0: not held
	}{
		{5, 1, 0.5, 1, 0.05, 0.15},    // slow start's doubling
		{5, 1, 0.9, 0.02, 0.02, 0.02}, // a climb of 2 % a second
		{50, 5, 0.7, 1, 0.02, 0},
		{50, 5, 0.95, 0.01, 0.02, 0},
		{50, 10, 0.9, 0.02, 0.02, 0},
		{20, 40, 0.5, 0.05, 0.02, 0}, // a bucket of twice its rate
		{7, 3, 0.97, 0.005, 0.02, 0},
	} {
		t.Run(fmt.Sprintf("%v/s-burst-%v-from-%v-climb-%v", c.rate, c.burst, c.from, c.climb), func(t *testing.T) {
			const t0 = int64(time.Hour)
			a := aimd{active: true, c: &aimdCycles{burst: c.burst, b0: c.burst, cycleOn: true, cycleAt: t0, resumeN: 100}}
			ring := make([]depRecord, depRing)
			level, last, at := c.burst, t0, t0
			var seq uint64 = 100
			for {
				seq++
				level = min(level+c.rate*float64(at-last)/1e9, c.burst)
				last = at
				if level < 1 {
					break // throttled
				}
				level--
				ring[seq%depRing] = depRecord{seq: seq, at: at}
				a.mark(seq, at)
				pace := c.from * c.rate * math.Pow(1+c.climb, float64(at-t0)/1e9)
				at += int64(1e9 / pace)
				if seq > 100000 {
					t.Fatal("never throttled")
				}
			}
			lo, hi, span := a.bounds(ring, seq, at)
			t.Logf("%d departures over %.1f s (stride %d): lo %.3f over %.2f s, hi %.3f", seq-101, float64(at-t0)/1e9, a.c.stride, lo, span, hi)
			if lo <= 0 || lo > c.rate {
				t.Errorf("lo %.3f, want in (0, %v]", lo, c.rate)
			}
			if hi != 0 && hi < c.rate {
				t.Errorf("hi %.3f, want at least %v", hi, c.rate)
			}
			if c.loTo > 0 && lo < c.rate*(1-c.loTo) {
				t.Errorf("lo %.3f, want within %.0f %% of %v", lo, 100*c.loTo, c.rate)
			}
			if c.hiTo > 0 && (hi == 0 || hi > c.rate*(1+c.hiTo)) {
				t.Errorf("hi %.3f, want within %.0f %% of %v", hi, 100*c.hiTo, c.rate)
			}
		})
	}
}

// TestAimdMarks holds the marks of a cycle to every stride-th departure
// from its first, all of the cycle's span, and no more than cycleMarks.
func TestAimdMarks(t *testing.T) {
	a := aimd{c: &aimdCycles{cycleOn: true, cycleAt: 1000, resumeN: 7}}
	a.mark(7, 1000) // before the cycle
	for seq := uint64(8); seq < 8+1000; seq++ {
		a.mark(seq, int64(seq)*1000)
	}
	c := a.c
	if c.nMarks > cycleMarks || c.nMarks < cycleMarks/2 {
		t.Fatalf("%d marks, want %d to %d", c.nMarks, cycleMarks/2, cycleMarks)
	}
	if c.stride != 32 {
		t.Errorf("stride %d, want 32", c.stride)
	}
	for i, m := range c.marks[:c.nMarks] {
		if want := 8 + uint64(i)*c.stride; m.seq != want || m.at != int64(want)*1000 {
			t.Errorf("mark %d: %d at %d, want %d", i, m.seq, m.at, want)
		}
	}
}
