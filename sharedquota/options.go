package sharedquota

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// A FailureMode says what Reserve does when Redis cannot answer in time.
type FailureMode int

const (
	// Fallback paces each key in this process alone, at its limits divided
	// by the number of processes last announced in Redis (or, if they were
	// never counted, by WithFallbackProcesses's assumption), starting from
	// empty buckets: together the processes stay within the limit while
	// Redis is away. When Redis answers again, the first reservation of
	// each key records what its fallback spent and the pauses it held, so
	// that a Redis restarted empty hands out no fresh burst. It is the
	// default.
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
	timeout       time.Duration
	mode          FailureMode
	retry         time.Duration
	heartbeat     time.Duration
	leaseSize     int
	leaseMaxAge   time.Duration
	prefix        string
	id            string
	ttlMargin     time.Duration
	maxWait       time.Duration // the cap on waits: maxServerWait
	salt          []byte
	fallbackProcs int
	mp            metric.MeterProvider // nil: no metrics
	log           *slog.Logger         // nil: no logging
}

func defaultConfig() config {
	return config{
		timeout:       50 * time.Millisecond,
		mode:          Fallback,
		retry:         250 * time.Millisecond,
		heartbeat:     time.Second,
		leaseMaxAge:   100 * time.Millisecond,
		prefix:        "headway",
		ttlMargin:     time.Second,
		maxWait:       maxServerWait,
		fallbackProcs: 4,
	}
}

// WithTimeout bounds every call to Redis. Default 50ms. A call that takes
// longer counts as Redis being unavailable. A call made for a request whose
// deadline is nearer takes at most half the time the request has left, and
// falls back for that request alone when Redis has not answered by then.
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
// Redis again (a reservation's, or the heartbeat's), and shared pacing
// resumes as soon as one succeeds. Default 250ms.
func WithRetryInterval(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.retry = d
		}
	})
}

// WithHeartbeat sets how often the process announces itself in Redis, in
// one call for all of its keys. An announcement lasts three intervals; the
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
// "headway": a quota's hash is named headway:{<hash of the key>}:q and the
// live processes headway:procs. Processes share quotas only with the same
// prefix. A prefix may not hold '{' or '}': Redis Cluster would place the
// keys by the prefix's braces, every quota in one slot. WithPrefix panics
// on one that does.
func WithPrefix(p string) Option {
	if strings.ContainsAny(p, "{}") {
		panic("sharedquota: WithPrefix: a prefix may not hold '{' or '}' (Cluster hash tags): " + strconv.Quote(p))
	}
	return optionFunc(func(c *config) {
		if p != "" {
			c.prefix = p
		}
	})
}

// WithSalt makes the names of the quotas in Redis an HMAC-SHA256 of the
// key under salt, a secret every process of the fleet shares, rather than
// a plain SHA-256: anyone who can read Redis, but does not know the salt,
// cannot test whether a guessed token is in use. Processes share quotas
// only with the same salt. Default none.
func WithSalt(salt []byte) Option {
	salt = slices.Clone(salt)
	return optionFunc(func(c *config) {
		if len(salt) > 0 {
			c.salt = salt
		}
	})
}

// WithFallbackProcesses sets how many processes Fallback assumes share
// each quota when it has never counted them: when Redis was away from the
// start. Once counted, the count last seen (the largest of the last three
// heartbeats) divides the limits instead, and stays while Redis is away.
// Default 4: a fleet that could not be counted is assumed to be one of
// several, never one process alone.
func WithFallbackProcesses(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.fallbackProcs = n
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

// maxServerWait is the longest wait a quota schedules or a pause lasts: the
// default of headway.WithMaxServerWait, 10 minutes.
const maxServerWait = 10 * time.Minute
