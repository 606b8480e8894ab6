package headway_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
)

// TestAdaptsToFoldedHeaders runs the dialect runs again behind a proxy
// that folds every rate-limit field into one comma-joined line (issue 12's
// held-out family): headway must read the folded fields as the plain ones,
// so each run ends exactly as its plain twin, in virtual time.
func TestAdaptsToFoldedHeaders(t *testing.T) {
	const n, workers, rate, burst = 500, 16, 50, 10
	for _, c := range dialectCases {
		t.Run(c.name, func(t *testing.T) {
			var runs [2]dialectResult
			for i, d := range []fakeserver.Dialect{c.dialect, fakeserver.Folded{Dialect: c.dialect}} {
				synctest.Test(t, func(t *testing.T) {
					fc := c
					fc.dialect = d
					srv := fakeserver.New(newDialectServer(fc, rate, burst))
					runs[i] = runDialect(t, srv, srv.Transport(), "http://api.test/items", n, workers, rate, burst)
				})
			}
			plain, folded := runs[0], runs[1]
			t.Logf("plain:  %v", plain)
			t.Logf("folded: %v", folded)
			if folded.rejected != plain.rejected || folded.early != plain.early ||
				folded.elapsed-plain.elapsed > 10*time.Millisecond || plain.elapsed-folded.elapsed > 10*time.Millisecond {
				t.Errorf("folded fields read otherwise than plain ones")
			}
		})
	}
}
