package headway

import (
	"sync"
	"sync/atomic"
	"time"
)

// BudgetOptions bounds the retries of a key to a share of its recent
// requests, as Finagle's RetryBudget and Envoy's retry_budget do: when a
// service fails, retries then add at most that share to its load instead of
// multiplying it by MaxAttempts. The zero value means the defaults.
//
// A retry is allowed while the retries of the last Window, this one
// included, are at most Ratio times the requests of the Window (first
// attempts only) plus MinPerSecond times the Window's length in seconds.
// The floor lets a key with little traffic retry at all. Only retries sent
// count: one allowed and then not sent after all (its context ended while
// it waited, its key refused it, its response was too large to keep while
// it waited) is given back.
type BudgetOptions struct {
	// Ratio is the share of requests that may be retried: 0.2 (the
	// default) allows one retry per five requests.
	Ratio float64

	// Window is the span over which requests and retries are counted, in
	// ten buckets: the counts of a bucket are forgotten Window after it
	// began. The default is 10 seconds.
	Window time.Duration

	// MinPerSecond is the floor: this many retries a second, averaged over
	// the Window, are allowed whatever the traffic. The default is 3 (thirty
	// retries per 10-second window: enough for the first burst of a key that
	// met a wall of 429s); a negative value means no floor.
	MinPerSecond float64

	// Disable turns the budget off: retries are bounded only by
	// RetryOptions.MaxAttempts and MaxElapsed.
	Disable bool
}

// Defaults of BudgetOptions, documented on its fields.
const (
	defaultBudgetRatio        = 0.2
	defaultBudgetWindow       = 10 * time.Second
	defaultBudgetMinPerSecond = 3.0
)

const budgetBuckets = 10

// retryBudget counts the requests and retries of one key over a sliding
// window of budgetBuckets buckets: O(1) memory, whatever the traffic. Time
// is a parameter of every method. A nil *retryBudget allows every retry.
// It is safe for concurrent use.
type retryBudget struct {
	ratio float64
	floor float64 // retries allowed per window whatever the traffic
	width time.Duration
	epoch time.Time

	mu      sync.Mutex
	buckets [budgetBuckets]budgetBucket
}

type budgetBucket struct {
	idx      atomic.Int64 // which bucket of time this is: its start / width
	requests atomic.Int64 // added to without the lock, on every request
	retries  int64
}

// newRetryBudget returns the budget o describes, its clock starting at
// now, or nil when o disables it.
func newRetryBudget(o BudgetOptions, now time.Time) *retryBudget {
	if o.Disable {
		return nil
	}
	if o.Ratio <= 0 {
		o.Ratio = defaultBudgetRatio
	}
	switch {
	case o.MinPerSecond == 0:
		o.MinPerSecond = defaultBudgetMinPerSecond
	case o.MinPerSecond < 0:
		o.MinPerSecond = 0
	}
	return &retryBudget{
		ratio: o.Ratio,
		floor: o.MinPerSecond * o.window().Seconds(),
		width: o.bucketWidth(),
		epoch: now,
	}
}

// window returns o's Window, or its default.
func (o BudgetOptions) window() time.Duration {
	if o.Window <= 0 {
		return defaultBudgetWindow
	}
	return o.Window
}

// bucketWidth returns the width of the buckets of the budgets o describes.
func (o BudgetOptions) bucketWidth() time.Duration { return max(o.window()/budgetBuckets, 1) }

// bucket returns the bucket of now, emptied if it last held an older one.
// b.mu must be held.
func (b *retryBudget) bucket(now time.Time) (*budgetBucket, int64) {
	idx := int64(now.Sub(b.epoch) / b.width)
	bk := &b.buckets[uint64(idx)%budgetBuckets]
	if bk.idx.Load() != idx {
		bk.requests.Store(0)
		bk.retries = 0
		bk.idx.Store(idx)
	}
	return bk, idx
}

// withdraw reports whether a retry at now fits in the budget, and records
// it if it does.
func (b *retryBudget) withdraw(now time.Time) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	bk, idx := b.bucket(now)
	var requests, retries int64
	for i := range b.buckets {
		if c := &b.buckets[i]; c.idx.Load() > idx-budgetBuckets && c.idx.Load() <= idx {
			requests += c.requests.Load()
			retries += c.retries
		}
	}
	if float64(retries+1) > b.ratio*float64(requests)+b.floor {
		return false
	}
	bk.retries++
	return true
}

// refund gives back a retry withdrawn at at that was not made after all,
// as rate.Reservation.Cancel gives back its tokens: the retry it stood for
// never reached the server. A retry withdrawn in a bucket that has left
// the window since is forgotten already: nothing is given back.
func (b *retryBudget) refund(at time.Time) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	idx := int64(at.Sub(b.epoch) / b.width)
	if bk := &b.buckets[uint64(idx)%budgetBuckets]; bk.idx.Load() == idx && bk.retries > 0 {
		bk.retries--
	}
}

// addAt adds n first attempts to the bucket of time index idx (the time
// since the budget's epoch over its bucket width), if that bucket is still
// in the window. Keys count their requests themselves and hand them over
// when a bucket ends or a retry asks (see keyState.countRequest).
func (b *retryBudget) addAt(idx, n int64) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	bk := &b.buckets[uint64(idx)%budgetBuckets]
	switch cur := bk.idx.Load(); {
	case cur == idx:
	case cur < idx:
		bk.requests.Store(0)
		bk.retries = 0
		bk.idx.Store(idx)
	default:
		return // the window has moved past it
	}
	bk.requests.Add(n)
}
