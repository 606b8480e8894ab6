package gcra

import (
	"math"
	"math/rand/v2"
	"testing"
)

// step is one request: at now, of cost units, leaving when it may.
type step struct {
	now, cost int64
	want      int64 // its departure
}

func run(t *testing.T, bs Buckets, steps []step) {
	t.Helper()
	for i, s := range steps {
		d := bs.Earliest(s.now, 1, s.cost)
		if d != s.want {
			t.Fatalf("step %d (t=%d, cost %d): leaves at %d, want %d", i, s.now, s.cost, d, s.want)
		}
		bs.Take(d, s.cost)
	}
}

// One limit of T=10, burst 3: three leave at once, then one every 10.
func TestBurstThenPace(t *testing.T) {
	run(t, Buckets{{Interval: 10, Burst: 3}}, []step{
		{0, 1, 0}, {0, 1, 0}, {0, 1, 0},
		{0, 1, 10}, {0, 1, 20},
		{25, 1, 30},
		{100, 1, 100}, {100, 1, 100}, {100, 1, 100}, {100, 1, 110},
	})
}

// A cost spends that many units of a weighted limit and one of an
// unweighted one; the stricter limit decides.
func TestCostsAndSeveralLimits(t *testing.T) {
	run(t, Buckets{{Interval: 10, Burst: 4}, {Interval: 100, Burst: 2, Unweighted: true}}, []step{
		{0, 2, 0},     // weighted: 2 of 4; requests: 1 of 2
		{0, 2, 0},     // 4 of 4; 2 of 2
		{0, 1, 100},   // requests: empty again for one at 100
		{100, 3, 200}, // weighted TAT 110 allows 100; requests (TAT 300) 200
	})
}

// Every rule at the edges of int64 saturates rather than wraps.
func TestSaturates(t *testing.T) {
	bs := Buckets{{Interval: 1 << 62, Burst: 1}}
	bs.Take(0, 1)
	bs.Take(bs.Earliest(0, 1, 1), 1)
	if bs[0].TAT != math.MaxInt64 {
		t.Fatalf("TAT %d, want MaxInt64", bs[0].TAT)
	}
	if d := bs.Earliest(0, 1, 3); d != math.MaxInt64 {
		t.Fatalf("leaves at %d, want never (MaxInt64)", d)
	}
	for _, c := range []struct{ a, b, sum, prod int64 }{
		{math.MaxInt64, 1, math.MaxInt64, math.MaxInt64},
		{math.MinInt64, -1, math.MinInt64, math.MaxInt64},
		{-1, math.MinInt64, math.MinInt64, math.MaxInt64},
		{math.MaxInt64, -2, math.MaxInt64 - 2, math.MinInt64},
		{3, -4, -1, -12},
		{0, math.MinInt64, math.MinInt64, 0},
	} {
		if got := SatAdd(c.a, c.b); got != c.sum {
			t.Errorf("SatAdd(%d, %d) = %d, want %d", c.a, c.b, got, c.sum)
		}
		if got := SatMul(c.a, c.b); got != c.prod {
			t.Errorf("SatMul(%d, %d) = %d, want %d", c.a, c.b, got, c.prod)
		}
	}
}

func TestGiveBackTooBigIdle(t *testing.T) {
	bs := Buckets{{Interval: 10, Burst: 2}, {Interval: 5, Burst: 1, Unweighted: true}}
	if !bs.Idle(0) {
		t.Fatal("a new state is not idle")
	}
	if i, ok := bs.TooBig(3); !ok || i != 0 {
		t.Fatalf("TooBig(3) = %d, %v; want limit 0", i, ok)
	}
	if _, ok := bs.TooBig(2); ok {
		t.Fatal("a cost of the burst is too big")
	}
	bs.Take(0, 2)
	if bs.Idle(19) || !bs.Idle(20) {
		t.Fatal("idle before its TATs, or not after")
	}
	bs.GiveBack(4, 2) // weighted back to 4 at most (not before now), requests to 4
	if bs[0].TAT != 4 || bs[1].TAT != 4 {
		t.Fatalf("TATs after giving back %d, %d; want 4, 4", bs[0].TAT, bs[1].TAT)
	}
}

// TakeNow takes what Earliest lets go at once, as Take does, and nothing
// else: two buckets, or one (its own path), of several costs, over random
// instants and edges.
func TestTakeNowAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 4000 {
		a := Buckets{{Interval: 1 + rng.Int64N(50), Burst: 1 + rng.Int64N(4)}, {Interval: 1 + rng.Int64N(200), Burst: 1 + rng.Int64N(3), Unweighted: rng.IntN(2) == 0}}
		if round%7 == 0 {
			a[0].Interval = 1 << 62 // saturating
		}
		switch round % 4 { // one bucket: weighted (saturating too), or either
		case 1:
			a = a[:1]
		case 3:
			a = a[1:]
		}
		b := append(Buckets(nil), a...)
		now := int64(0)
		for range 50 {
			now += rng.Int64N(60)
			cost := 1 + rng.Int64N(3)
			want := a.Earliest(now, 1, cost) <= now
			if want {
				a.Take(now, cost)
			}
			if got := b.TakeNow(now, cost); got != want {
				t.Fatalf("round %d at %d cost %d: TakeNow %v, Earliest says %v", round, now, cost, got, want)
			}
			for i := range a {
				if a[i].TAT != b[i].TAT {
					t.Fatalf("round %d at %d: TAT %d after TakeNow, %d after Take", round, now, b[i].TAT, a[i].TAT)
				}
			}
		}
	}
}
