package headway

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// deposit counts a first attempt at now in b, as a key hands its count
// over (see keyState.countRequest).
func deposit(b *retryBudget, now time.Time) {
	if b != nil {
		b.addAt(int64(now.Sub(b.epoch)/b.width), 1)
	}
}

// spend withdraws until the budget refuses, and returns how many it allowed.
func spend(b *retryBudget, now time.Time) int {
	n := 0
	for b.withdraw(now) {
		n++
		if n > 1_000_000 {
			panic("budget never refuses")
		}
	}
	return n
}

func TestBudgetFloorOnly(t *testing.T) {
	b := newRetryBudget(BudgetOptions{}, t0)
	// No requests: only the floor, 3/s over 10 s.
	assert.Equal(t, 30, spend(b, t0))
	assert.False(t, b.withdraw(t0.Add(5*time.Second)), "still within the window")
}

func TestBudgetRatio(t *testing.T) {
	b := newRetryBudget(BudgetOptions{Ratio: 0.2, MinPerSecond: -1}, t0)
	for range 100 {
		deposit(b, t0)
	}
	assert.Equal(t, 20, spend(b, t0))
	// Five more requests earn one more retry.
	for range 5 {
		deposit(b, t0.Add(time.Second))
	}
	assert.Equal(t, 1, spend(b, t0.Add(time.Second)))
}

func TestBudgetRatioPlusFloor(t *testing.T) {
	b := newRetryBudget(BudgetOptions{Ratio: 0.5, Window: 2 * time.Second, MinPerSecond: 2}, t0)
	for range 10 {
		deposit(b, t0)
	}
	assert.Equal(t, 5+4, spend(b, t0))
}

func TestBudgetRecoversAsTheWindowSlides(t *testing.T) {
	b := newRetryBudget(BudgetOptions{Ratio: 0.1, Window: 10 * time.Second, MinPerSecond: -1}, t0)
	for range 100 {
		deposit(b, t0)
	}
	require.Equal(t, 10, spend(b, t0))

	// Steps of the window: the t0 bucket is forgotten 10 s after it began.
	steps := []struct {
		at      time.Duration
		deposit int
		want    int
	}{
		{at: 3 * time.Second, deposit: 0, want: 0},         // spent
		{at: 5 * time.Second, deposit: 50, want: 5},        // 150 requests: 15 retries, 10 spent
		{at: 9999 * time.Millisecond, deposit: 0, want: 0}, // the t0 bucket is still counted
		{at: 10 * time.Second, deposit: 0, want: 0},        // t0 forgotten: 50 requests, 5 retries (at 5 s)
		{at: 15 * time.Second, deposit: 0, want: 0},        // the 5 s bucket too: nothing left, nothing earned
		{at: 15 * time.Second, deposit: 10, want: 1},
		{at: time.Hour, deposit: 0, want: 0}, // long idle: all forgotten
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		for range s.deposit {
			deposit(b, now)
		}
		assert.Equal(t, s.want, spend(b, now), "at %v", s.at)
	}
}

func TestBudgetDisabledAndNil(t *testing.T) {
	b := newRetryBudget(BudgetOptions{Disable: true}, t0)
	require.Nil(t, b)
	deposit(b, t0)
	for range 1000 {
		require.True(t, b.withdraw(t0))
	}
}

func TestBudgetBeforeItsEpoch(t *testing.T) {
	b := newRetryBudget(BudgetOptions{MinPerSecond: -1}, t0)
	deposit(b, t0.Add(-time.Minute)) // a clock that stepped back must not panic
	assert.Equal(t, 0, spend(b, t0.Add(-time.Minute)))
}

func TestBudgetConcurrent(t *testing.T) {
	b := newRetryBudget(BudgetOptions{Ratio: 0.5, MinPerSecond: -1}, t0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				now := t0.Add(time.Duration(g*1000+i) * time.Microsecond)
				deposit(b, now)
				if b.withdraw(now) {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 4000, allowed, "half of 8000 requests, whatever the interleaving")
}

// A retry given back is allowed again, in the window it was withdrawn in;
// one withdrawn in a bucket the window has left is forgotten already, and
// giving it back gives nothing.
func TestBudgetRefund(t *testing.T) {
	b := newRetryBudget(BudgetOptions{Ratio: 0.1, Window: 10 * time.Second, MinPerSecond: -1}, t0)
	for range 20 {
		deposit(b, t0)
	}
	require.Equal(t, 2, spend(b, t0), "two retries for 20 requests")

	b.refund(t0)
	assert.Equal(t, 1, spend(b, t0.Add(time.Second)), "the retry given back")

	b.refund(t0.Add(2 * time.Second)) // none was withdrawn in that bucket
	assert.Equal(t, 0, spend(b, t0.Add(2*time.Second)))

	later := t0.Add(15 * time.Second) // t0 and 1 s have left the window
	for range 10 {
		deposit(b, later)
	}
	require.Equal(t, 1, spend(b, later))
	b.refund(t0)
	assert.Equal(t, 0, spend(b, later), "a retry of a bucket the window left gives nothing back")
	b.refund(later)
	assert.Equal(t, 1, spend(b, later))

	b.refund(t0.Add(-time.Minute)) // a clock that stepped back must not panic
	var none *retryBudget
	none.refund(t0) // budgets off
}
