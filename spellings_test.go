package headway_test

import (
	"testing"
	"time"

	"github.com/headway-go/headway/fakeserver"
)

// TestXRateLimitSpellings runs the Transport, with no limit configured,
// against a bucket of 20/s burst 10 that states its quota in each spelling
// and form of the X-RateLimit family the fake server plays (a vendor's name
// before the fields, resets as epochs, RFC 3339 or JavaScript dates, waits
// as X-RateLimit-Retry-After or X-RateLimit-Next, a stated refill), in
// virtual time, with 8 and 32 workers: read as the server means them, they
// pace the key as GitHub's fields do. Held: efficiency 0.95, at most one
// throttle, none sent inside a wait.
func TestXRateLimitSpellings(t *testing.T) {
	var cases []shapeCase
	for _, name := range []string{"x-ratelimit", "sentry", "brevo", "lemlist", "mailerlite", "akamai", "atlassian-dc"} {
		d, err := fakeserver.DialectByName(name)
		if err != nil {
			t.Fatal(err)
		}
		sh := fakeserver.Shape{Name: name, Rate: 20, Burst: 10,
			Config: fakeserver.Config{Limit: 20, Window: time.Second, Burst: 10, Dialect: d,
				Faults: fakeserver.Faults{Latency: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, Seed: 1}}}
		cases = append(cases, shapeCase{Shape: sh, n: sh.Burst + int(20*sh.Rate), minEff: 0.95, maxThrottled: 1})
	}
	runShapeCases(t, cases)
}
