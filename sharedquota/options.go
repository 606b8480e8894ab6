package sharedquota

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/headway-go/headway"
	"go.opentelemetry.io/otel/metric"
)

// A FailureMode says what Reserve does when Redis cannot answer in time.
type FailureMode int

const (
	// Fallback paces each key in this process alone, at its limits divided
	// by the number of processes that last announced themselves for the
	// key (one if none did): together the processes stay near the limit
	// while Redis is away. It is the default.
	Fallback FailureMode = iota
	// FailOpen lets every request go at once, unpaced by the shared quota
	// (the Transport's own limits still apply).
	FailOpen
	// FailClosed fails every request with an UnavailableError.
	FailClosed
)

// String returns "fallback", "fail-open" or "fail-closed".
func (m FailureMode) String() string {
	switch m {
	case Fallback:
		return "fallback"
	case FailOpen:
		return "fail-open"
	case FailClosed:
		return "fail-closed"
	}
	return fmt.Sprintf("FailureMode(%d)", int(m))
}

// An Option configures a Redis quota.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	timeout     time.Duration
	mode        FailureMode
	retry       time.Duration
	heartbeat   time.Duration
	leaseSize   int
	leaseMaxAge time.Duration
	prefix      string
	id          string
	ttlMargin   time.Duration
	maxWait     time.Duration        // the cap on waits: headway.DefaultMaxWait
	mp          metric.MeterProvider // nil: no metrics
	log         *slog.Logger         // nil: no logging
}

func defaultConfig() config {
	return config{
		timeout:     50 * time.Millisecond,
		mode:        Fallback,
		retry:       500 * time.Millisecond,
		heartbeat:   time.Second,
		leaseMaxAge: 100 * time.Millisecond,
		prefix:      "headway",
		ttlMargin:   time.Second,
		maxWait:     headway.DefaultMaxWait,
	}
}

// WithTimeout bounds every call to Redis. Default 50ms. A call that takes
// longer counts as Redis being unavailable.
func WithTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	})
}

// WithFailureMode sets what Reserve does while Redis is unavailable.
// Default Fallback.
func WithFailureMode(m FailureMode) Option {
	return optionFunc(func(c *config) { c.mode = m })
}

// WithRetryInterval sets how long after a failed call the quota stops
// asking Redis and decides by its FailureMode alone; then one call tries
// Redis again, and shared pacing resumes as soon as one succeeds. Default
// 500ms.
func WithRetryInterval(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.retry = d
		}
	})
}

// WithHeartbeat sets how often the process announces itself in Redis for
// each key it used recently. An announcement lasts three intervals; the
// number of live announcements divides the limits under Fallback. Default
// one second.
func WithHeartbeat(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.heartbeat = d
		}
	})
}

// WithLease turns on lease mode: a request of one unit takes its slot from a
// batch of size slots that the process reserved in one round trip, so that
// Redis sees one call per size requests. The slots keep their place in the
// shared schedule: a request waits for its slot's time as it would have
// waited for a slot reserved alone. A slot not used within the lease's
// maximum age past its time is dropped (see WithLeaseMaxAge), so a process
// can exceed its share by at most one lease. Requests of more than one unit
// reserve directly. Default 0: off.
func WithLease(size int) Option {
	return optionFunc(func(c *config) { c.leaseSize = max(size, 0) })
}

// WithLeaseMaxAge sets how long after its time a leased slot may still be
// used. Default 100ms.
func WithLeaseMaxAge(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d >= 0 {
			c.leaseMaxAge = d
		}
	})
}

// WithPrefix sets the first part of every key name in Redis. Default
// "headway": a quota's keys are named headway:{<hash of the key>}:q and
// headway:{<hash of the key>}:procs.
func WithPrefix(p string) Option {
	return optionFunc(func(c *config) {
		if p != "" {
			c.prefix = p
		}
	})
}

// WithProcessID sets the name this process announces itself with. Default:
// the host name, the process id and a random suffix. Two processes must not
// share one.
func WithProcessID(id string) Option {
	return optionFunc(func(c *config) {
		if id != "" {
			c.id = id
		}
	})
}

func defaultProcessID() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
