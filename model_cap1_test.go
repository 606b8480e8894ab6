package headway

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
)

// A bucket of one request a second (burst 1) answers every request it
// admits with 0 left, whatever its rate: a model that waits for a full
// bucket before it sends is never shown to be too slow. Its rate was
// re-measured over spans that refill about one request, from counts that
// are the floor of the level: a throttle of a model a third too fast (the
// bucket held 0.79, the answer said 0) cut 1.3/s to 0.03/s, and with 1 ms
// answers to 0.002/s, and the key never recovered: 15 requests took 6-7
// minutes at 20 ms, and at 1 ms 7 or 8 of them got through in 55 minutes
// among thousands of WaitErrors (a queue's known wait of an hour). Now
// the rate is re-measured over spans that refill four requests, a
// throttle's named wait states the level to a fraction of a request, and
// a count is an interval: the same servers take within a few percent of
// the least time, and so do slower and deeper buckets.
func TestABucketOfOneIsNotTakenForAnEmptyOne(t *testing.T) {
	for _, b := range []struct {
		limit, burst int
		window       time.Duration
	}{{1, 1, time.Second}, {1, 1, 2 * time.Second}, {2, 1, time.Second}, {1, 2, time.Second}, {3, 2, 2 * time.Second}} {
		for _, d := range []fakeserver.Dialect{fakeserver.AzureOpenAI{}, fakeserver.Shopify{}} {
			for _, lat := range []time.Duration{time.Millisecond, 20 * time.Millisecond} {
				name := fmt.Sprintf("%d per %v burst %d/%T/%v", b.limit, b.window, b.burst, d, lat)
				t.Run(name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						cfg := fakeserver.Config{Limit: b.limit, Window: b.window, Burst: b.burst,
							Dialect: d, Faults: fakeserver.Faults{Latency: lat}}
						done, errs, took := modelRun(t, cfg, 15, 8, time.Hour)
						least := time.Duration(15-b.burst) * b.window / time.Duration(b.limit)
						t.Logf("%d of 15 in %v (least %v), %d errors", done, took, least, len(errs))
						// Measured: 1.00-1.29 of the least time.
						if done != 15 || len(errs) > 0 || took > least*3/2 {
							t.Errorf("%d of 15 in %v, %d errors; want all within %v (least %v)", done, took, len(errs), least*3/2, least)
						}
					})
				})
			}
		}
	}
}
