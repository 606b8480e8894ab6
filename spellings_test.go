package headway_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
)

// TestXRateLimitSpellings runs the Transport, with no limit configured,
// against a bucket of 20/s burst 10 that states its quota in each spelling
// and form of the X-RateLimit family the fake server plays (a vendor's name
// before the fields, resets as epochs, RFC 3339 or JavaScript dates, waits
// as X-RateLimit-Retry-After or X-RateLimit-Next), in virtual time, with 8
// and 32 workers: read as the server means them, they pace the key as
// GitHub's fields do. Held: efficiency 0.95, at most one throttle, none
// sent inside a wait the client knew of.
func TestXRateLimitSpellings(t *testing.T) {
	for _, name := range []string{"x-ratelimit", "sentry", "brevo", "lemlist", "mailerlite", "akamai", "atlassian-dc"} {
		d, err := fakeserver.DialectByName(name)
		if err != nil {
			t.Fatal(err)
		}
		sh := fakeserver.Shape{Name: name, Rate: 20, Burst: 10,
			Config: fakeserver.Config{Limit: 20, Window: time.Second, Burst: 10, Dialect: d,
				Faults: fakeserver.Faults{Latency: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, Seed: 1}}}
		for _, workers := range []int{8, 32} {
			t.Run(fmt.Sprintf("%s/%d", name, workers), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					time.Sleep(300 * time.Millisecond)
					srv := fakeserver.New(sh.Config)
					r := runShape(t, sh, srv, srv.Transport(), "http://api.test", sh.Burst+int(20*sh.Rate), workers)
					t.Log(r)
					if r.efficiency < 0.95 {
						t.Errorf("efficiency %.3f, want at least 0.95", r.efficiency)
					}
					if r.throttled > 1 {
						t.Errorf("%d throttled, want at most 1", r.throttled)
					}
					if r.ignored != 0 {
						t.Errorf("%d sent inside a wait the client knew of", r.ignored)
					}
				})
			})
		}
	}
}
