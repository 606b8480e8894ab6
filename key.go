package headway

import (
	"sync/atomic"
	"time"
)

// keyEnv is what a key needs of the Transport that holds it, and all it
// gets: the pacer's clock, the configuration, the outage probes' schedule
// and the table of hosts with the end of their longest pause. A key never
// sees the Transport itself.
type keyEnv struct {
	cfg   config
	probe probeSchedule
	hosts hostTable
	epoch time.Time // the origin of the pacer's clock (see now)

	hostPauses atomic.Int64 // the end of the longest host pause, on the pacer's clock
}
