package sharedquota

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headway-go/headway"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
)

// Redis is a headway.SharedQuota kept in Redis: one quota, and one pause,
// per key, for every process that uses the same Redis and the same key.
// Create it with NewRedis; it is safe for concurrent use. Close stops its
// heartbeat.
type Redis struct {
	c     redis.Scripter
	cfg   config
	guard bool // the client ignores context deadlines: bound each call ourselves
	base  time.Time

	mu   sync.Mutex
	keys map[string]*keyState

	health health // of Redis as a whole

	cluster    *redis.ClusterClient // nil unless the client is one
	reloadedAt atomic.Int64         // monotonic ns: the last slot map reload asked

	procsKey string // the sorted set of the live processes
	channel  string // where pauses are published
	byHash   map[string]*keyState
	sub      pauseSub

	live     atomic.Int64 // the processes counted; 0: never
	liveNow  atomic.Int64 // the newest count; 0 since Redis was last found down
	liveMu   sync.Mutex
	liveSeen [3]int64 // the last counts, newest first
	// uncounted is set while the heartbeat finds the set of processes
	// unusable (it holds a value of another type), so that the change is
	// logged once, and once more when it ends.
	uncounted atomic.Bool

	stats struct {
		reservations, roundTrips, errors, degraded, leased atomic.Int64
	}

	kick      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closed    atomic.Bool

	metricsReg metric.Registration // nil without WithMeterProvider

	outs outages // the outages of the keys' hosts: see outage.go
}

var (
	_ headway.SharedQuota        = (*Redis)(nil)
	_ headway.SharedPauseChecker = (*Redis)(nil)
	_ headway.SharedLearner      = (*Redis)(nil)
)

// keyState is what the process keeps for one key.
type keyState struct {
	hashKey  string       // the quota's hash: TATs and pause
	lastUsed atomic.Int64 // monotonic ns
	checked  atomic.Int64 // monotonic ns: when PausedFor last asked Redis
	learned  atomic.Pointer[learnedPolicy]
	capSeen  atomic.Int64 // the most the server said was left, plus one; 0: none said
	// firstLearn is closed when this process's first policy for the key
	// is shared (nil when none is on its way): until then a reservation
	// without limits waits for it (see learnPolicy).
	firstLearn atomic.Pointer[chan struct{}]
	// cutting is closed when the bare throttle this process is telling
	// Redis of is taken in (nil when none is on its way): until then a
	// reservation without limits waits for it (see learnThrottle).
	cutting atomic.Pointer[chan struct{}]
	health  health // of this key's hash: a WRONGTYPE fails it alone

	mu         sync.Mutex
	pauseUntil int64 // monotonic ns: the last pause this process knows of
	local      localPacer
	keys       []string        // {hashKey}: the KEYS of the quota's scripts
	fallback   bool            // deciding by the local pacer since Redis was last asked
	lastDep    int64           // monotonic ns: the latest shared departure known here
	lastDepAt  int64           // monotonic ns: when Redis last told of it
	bookedTo   int64           // monotonic ns: the latest the schedule of bookedLims was booked to
	bookedLims []headway.Limit // the limits of the reservations that told of bookedTo
	oneArgs    []any           // reserveOneScript's arguments for oneCost units of oneLimit
	oneLimit   headway.Limit
	oneCost    int
	slots      []int64 // leased departures, monotonic ns, in order
	leaseSem   chan struct{}
	// Reservations without limits: the slowest pace Redis applied to the
	// last (µs; 0: none), for the fallback, and the latest of them, for
	// the throttles that cut the fleet's pace (see departedSeq).
	pace    int64
	deps    [depRing]depRecord
	depNext int
	// The last cut of the fleet's pace this process heard of: the count
	// at it, and when it heard (monotonic ns).
	cutSeq, cutAt int64
	// held are when the reservations held for the fleet's probe ask
	// again (monotonic ns).
	held []int64
	// graceUntil ends the grace after a fallback (see graceMult).
	graceUntil int64
	// restore is set when a reply showed that Redis forgot what this
	// process knew it held (see forgot): the next reservation records it
	// again (see floors).
	restore bool
}

// NewRedis returns a shared quota kept in Redis through client: a
// *redis.Client (one node, or Sentinel through redis.NewFailoverClient), a
// *redis.ClusterClient or a *redis.Ring. It starts a heartbeat goroutine,
// which Close stops.
//
// Every call to Redis is bounded by the timeout of WithTimeout, and by half
// the time its request has left (see the package documentation). A client
// whose ContextTimeoutEnabled option is set honours it on the socket; for
// any other client, each call runs in a goroutine of its own that the quota
// stops waiting for at the timeout (the goroutine ends with the client's
// own read timeout). Set ContextTimeoutEnabled.
func NewRedis(client redis.UniversalClient, opts ...Option) *Redis {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.id == "" {
		cfg.id = defaultProcessID()
	}
	r := &Redis{
		c:     client,
		cfg:   cfg,
		guard: !honoursContext(client),
		base:  time.Now(),
		keys:  make(map[string]*keyState),

		procsKey: cfg.prefix + ":procs",
		channel:  cfg.prefix + ":pauses",
		byHash:   make(map[string]*keyState),
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	r.cluster, _ = client.(*redis.ClusterClient)
	r.reloadedAt.Store(math.MinInt64 / 2)
	r.registerMetrics()
	r.subscribe(client)
	go r.loop()
	return r
}

func honoursContext(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// Stats counts what a Redis quota did since it was created.
type Stats struct {
	// Reservations is the number of Reserve calls that returned a wait.
	Reservations int64
	// RoundTrips is the number of scripts sent to Redis, heartbeats
	// included.
	RoundTrips int64
	// Errors is the number of those that failed.
	Errors int64
	// Degraded is the number of reservations decided without Redis, by the
	// FailureMode.
	Degraded int64
	// Leased is the number of reservations served from a lease.
	Leased int64
}

// Stats returns a snapshot of the counters.
func (r *Redis) Stats() Stats {
	return Stats{
		Reservations: r.stats.reservations.Load(),
		RoundTrips:   r.stats.roundTrips.Load(),
		Errors:       r.stats.errors.Load(),
		Degraded:     r.stats.degraded.Load(),
		Leased:       r.stats.leased.Load(),
	}
}

// Live returns the number of processes sharing the Redis (and the prefix)
// that were announced when the heartbeat last looked (the largest count of
// its last three looks), for a key this process uses; zero for another
// key, or if the heartbeat has not looked yet.
func (r *Redis) Live(key string) int {
	r.mu.Lock()
	ks := r.keys[key]
	r.mu.Unlock()
	if ks == nil {
		return 0
	}
	return int(r.live.Load())
}

// KeyNames returns the names of the Redis keys that hold key's quota and
// the live processes (one sorted set for every key: the processes announce
// themselves once, not once per key). The quota's name holds a hash of
// key, never key itself, which may be a credential; see WithSalt.
func (r *Redis) KeyNames(key string) (quota, procs string) {
	var sum []byte
	if r.cfg.salt != nil {
		m := hmac.New(sha256.New, r.cfg.salt)
		m.Write([]byte(key))
		sum = m.Sum(nil)
	} else {
		s := sha256.Sum256([]byte(key))
		sum = s[:]
	}
	return r.cfg.prefix + ":{" + hex.EncodeToString(sum[:12]) + "}:q", r.procsKey
}

// Reserve spends cost units of each of limits for one request on key, in
// every process sharing the Redis, and returns how long from now the
// request must wait: until the later of the key's shared pause and its GCRA
// departure over all of limits at once. When that wait is longer than
// within, it spends nothing, in Redis or in this process, and returns the
// wait. It implements headway.SharedQuota.
//
// When Redis fails or times out, Reserve decides by the FailureMode; it
// returns an error only under FailClosed, for invalid limits, after Close,
// or when ctx is done.
func (r *Redis) Reserve(ctx context.Context, key string, limits []headway.Limit, cost int, within time.Duration) (time.Duration, error) {
	if r.closed.Load() {
		return 0, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if cost < 0 {
		return 0, ErrInvalidLimit
	}
	for _, l := range limits {
		if l.Count <= 0 || l.Period <= 0 {
			return 0, ErrInvalidLimit
		}
	}
	start := r.now()
	within = min(max(within, 0), r.cfg.maxWait)
	withinUs := int64(within / time.Microsecond)
	ks := r.state(key)
	if len(limits) == 0 {
		// The policy this process just read is on its way to Redis, or
		// the throttle it just met: a request reserved before it lands
		// would go unpaced, or at the pace the throttle refused (the
		// first burst's, into the block it began). It waits as long as a
		// call to Redis may take.
		r.awaitLanding(ctx, ks.firstLearn.Load())
		r.awaitLanding(ctx, ks.cutting.Load())
	}
	mult := r.graceMult(ks, limits)
	if r.cfg.leaseSize > 1 && oneUnit(limits, cost) && mult == 1 {
		return r.reserveLease(ctx, ks, limits, within, start)
	}
	if err := r.usable(ks); err != nil {
		return r.degrade(ks, limits, cost, within, start, err)
	}
	var (
		v      any
		err    error
		w      int64
		tail   replyTail
		args   []any
		script *redis.Script
		sent   int64
	)
	var lt learned
	for again := true; again; {
		ks.mu.Lock()
		pauseFloor, floors := ks.floors(limits, r.now())
		if len(limits) == 1 && mult == 1 {
			args = append(ks.oneArgsFor(limits[0], cost, r.marginMs()), withinUs, r.capUs(), floors[0], pauseFloor)
			ks.mu.Unlock()
			script = reserveOneScript
		} else {
			args = scaledArgs(limits, cost, mult, 1, r.marginMs(), withinUs, r.capUs(), pauseFloor, floors)
			if len(limits) == 0 {
				args = append(args, r.cfg.id)
			}
			ks.mu.Unlock()
			script = reserveScript
		}
		sent = r.now()
		if v, err = r.eval(ctx, script, ks.keys, args); err == nil && len(limits) == 0 {
			v, lt, err = learnedTail(v)
		}
		if err == nil {
			var waits [1]int64
			var ws []int64
			if ws, tail, err = reserveReply(waits[:0], v, 1, r.maxReplyUs(), r.capUs()); err == nil {
				w = ws[0]
			}
		}
		// Redis forgot what this process knew it held: the reservation
		// records it again, and takes its slot after it.
		again = err == nil && r.forgot(ks, limits, r.now(), w, tail)
	}
	if err == nil {
		r.up(ks)
		now := r.now()
		r.stats.reservations.Add(1)
		ks.shared(limits, sent, now, w, withinUs, tail, r.grace())
		if len(limits) == 0 {
			ks.heardCut(now, lt.cutSeq)
			ks.mu.Lock()
			ks.sawPace(now, lt.pace)
			switch {
			case lt.held:
				ks.noteHeld(now + w*1000)
			case w <= withinUs:
				ks.noteDeps(lt.seq, []int64{now + w*1000})
			}
			ks.mu.Unlock()
		}
		return time.Duration(w) * time.Microsecond, nil
	}
	if r.failed(ctx, ks, err) {
		return 0, ctx.Err()
	}
	return r.degrade(ks, limits, cost, within, start, err)
}

// awaitLanding waits until f, if not nil, is closed, as long as a call to
// Redis under ctx may take at most.
func (r *Redis) awaitLanding(ctx context.Context, f *chan struct{}) {
	if f == nil {
		return
	}
	bound, _ := r.callBound(ctx)
	tm := time.NewTimer(bound)
	select {
	case <-*f:
	case <-tm.C:
	case <-ctx.Done():
	}
	tm.Stop()
}

// floors returns what the key's fallback spent ahead of now, if it is in
// fallback: the pause it holds and the TAT of each of limits, in µs from
// now, for the next script to record (see reserveScript); when Redis
// forgot what this process knew it held (see forgot), the pause it knows
// of and the schedule booked as far as a fallback would start after (the
// buckets empty there). Otherwise, zeros. The caller locks ks.
func (ks *keyState) floors(limits []headway.Limit, now int64) (pause int64, tats []int64) {
	tats = make([]int64, 0, max(len(limits), 1))
	switch {
	case ks.fallback:
		tats = ks.local.floors(tats, limits, now)
		pause = max(ks.pauseUntil-now, 0) / 1000
	case ks.restore:
		pause = max(ks.pauseUntil-now, 0) / 1000
	}
	for len(tats) < max(len(limits), 1) {
		tats = append(tats, 0)
	}
	if ks.restore && ks.bookedTo > now && sameLimits(limits, ks.bookedLims) {
		// Booked to bookedTo when Redis last said, and a second a
		// second since, as a fallback reckons (see fallbackFrom).
		booked := (ks.bookedTo + min(max(now-ks.lastDepAt, 0), int64(time.Second)) - now) / 1000
		for i, l := range limits {
			tats[i] = max(tats[i], booked+burstOf(l)*intervalUs(l))
		}
	}
	return pause, tats
}

// forgot reports whether Redis, answering a reservation of ks under limits
// at now with its first slot first µs from now and tail, holds less than
// this process knew it held: a pause that ends sooner than the one this
// process heard of, or a first slot before the time the schedule of the
// same limits was booked to when Redis last said. Neither ever
// moves back while Redis keeps its data; both do when Redis was emptied
// without a call failing (FLUSHALL, a restart between two calls that the
// client's retries hide, a failover to a replica behind). What is known
// of the schedule is never later than it was (see shared); what is known
// of the pause may be, by a reply's or a message's way back: a pause
// within the timeout of Redis's is Redis's. Either is given an eighth of
// what is left of it, and a millisecond, for the clocks' rates. The first
// time, it marks ks for the next reservation to record what this process
// knows again (see floors) and reports true: the caller reserves again at
// once. The schedule of a key without limits follows a pace that may
// start again (see cutScript): only its pause counts.
func (r *Redis) forgot(ks *keyState, limits []headway.Limit, now, first int64, tail replyTail) bool {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.restore {
		ks.restore = false // recorded
		return false
	}
	behind := func(knew, holds, late int64) bool {
		return knew-holds > late+(knew-now)/8+int64(time.Millisecond)
	}
	schedule := len(limits) > 0 && sameLimits(limits, ks.bookedLims)
	if behind(ks.pauseUntil, now+tail.pause*1000, int64(r.cfg.timeout)) || schedule && behind(ks.bookedTo, now+first*1000, 0) {
		ks.restore = true
		return true
	}
	return false
}

// shared notes a reservation sent to Redis at sent that Redis answered at
// now with a wait of w µs, within withinUs, and the reply's tail: the
// fallback, if any, is over (the script recorded its floors); the latest
// departure booked by any process is where a fallback would start (so
// that it does not send beside slots other processes still hold), and
// the schedule of limits (if any) was booked to no earlier than sent and
// tail.last (what forgot holds Redis to); and the pause is known as of
// now, which spares PausedFor a round trip (see pauseCoalesce).
func (ks *keyState) shared(limits []headway.Limit, sent, now, w, withinUs int64, tail replyTail, grace int64) {
	ks.mu.Lock()
	if ks.fallback {
		ks.graceUntil = now + grace
	}
	ks.fallback = false
	if w <= withinUs {
		ks.lastDep = max(ks.lastDep, now+w*1000)
	}
	ks.lastDep = max(ks.lastDep, now+tail.last*1000)
	if len(limits) > 0 {
		if !sameLimits(limits, ks.bookedLims) {
			ks.bookedLims, ks.bookedTo = slices.Clone(limits), 0
		}
		ks.bookedTo = max(ks.bookedTo, sent+tail.last*1000)
	}
	ks.lastDepAt = now
	ks.pausedTill(now + tail.pause*1000)
	ks.mu.Unlock()
	ks.checked.Store(now)
}

// pausedTill notes that Redis holds the key's pause until until
// (monotonic ns). A pause that ends later than this process knew drops the
// leased slots it covers, as Pause and a published pause drop them all:
// booked before it, each would otherwise be moved to its end, and a
// lease's worth of requests would leave at once as it ends. The caller
// locks ks.
func (ks *keyState) pausedTill(until int64) {
	if until <= ks.pauseUntil {
		return
	}
	ks.pauseUntil = until
	i := 0
	for i < len(ks.slots) && ks.slots[i] < until {
		i++
	}
	ks.slots = ks.slots[i:]
}

// fallbackFrom returns, under ks.mu, where a fallback entered at now
// starts: after the latest shared departure this process knows of, and
// after what the others booked since it learned of that one. A schedule
// booked ahead (the fleet at its limit) grows as time passes, a second a
// second, so the time since counts too (a second at most); a schedule not
// booked ahead has room now.
func (ks *keyState) fallbackFrom(now int64) int64 {
	if ks.lastDep <= now {
		return now
	}
	return ks.lastDep + min(max(now-ks.lastDepAt, 0), int64(time.Second))
}

// grace is how long at most a key that Redis answers again, after its
// fallback, spends the shares of the processes not yet back (see
// graceMult). They come back within a retry interval or so (a client that
// failed to dial, as go-redis does, tries again once a second): 1.5s,
// four retry intervals or two heartbeats, whichever is longest, up to 5s.
func (r *Redis) grace() int64 {
	return int64(min(max(1500*time.Millisecond, 4*r.cfg.retry, 2*r.cfg.heartbeat), 5*time.Second))
}

// graceMult returns how many times its units a reservation of ks spends
// in Redis: 1, except in the grace after a fallback. Until every process
// counted before is announced again, those still in fallback send their
// shares, which Redis does not see: each process back spends the shares
// of those not back, live over the count announced since Redis came back
// (rounded up), so that the shared schedule stays that of the whole fleet
// (a Redis restarted empty would otherwise hand the first process back a
// full burst, and then the limit, on top of the others' fallbacks). Keys
// without limits, paced by what the fleet learned, are not scaled.
func (r *Redis) graceMult(ks *keyState, limits []headway.Limit) int {
	if len(limits) == 0 {
		return 1
	}
	now := r.now()
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if !ks.fallback && now >= ks.graceUntil {
		return 1
	}
	live, back := r.live.Load(), r.liveNow.Load()
	if back >= live {
		ks.graceUntil = 0
		return 1
	}
	return int((live + max(back, 1) - 1) / max(back, 1))
}

// Pause makes every process wait d from now before its next request on
// key; a shorter pause never cuts a longer one short. The pause is kept in
// Redis, in Redis's clock, and in this process, so that Fallback honours it
// too. It implements headway.SharedQuota.
//
// A pause is at most 10 minutes (headway.WithMaxServerWait's default), the longest wait
// a quota schedules: a longer d, such as a year-long Retry-After, pauses
// every process for that long only, and is logged at Warn.
func (r *Redis) Pause(ctx context.Context, key string, d time.Duration) error {
	if r.closed.Load() {
		return ErrClosed
	}
	if d <= 0 {
		return nil
	}
	if d > r.cfg.maxWait {
		r.logWarn("headway/sharedquota: a pause longer than the cap is shortened to it",
			slog.Duration("pause", d), slog.Duration("cap", r.cfg.maxWait))
		d = r.cfg.maxWait
	}
	ks := r.state(key)
	now := r.now()
	ks.mu.Lock()
	ks.pauseUntil = max(ks.pauseUntil, now+int64(d))
	ks.slots = ks.slots[:0] // leased slots are not worth keeping past a pause
	ks.mu.Unlock()
	if err := r.usable(ks); err != nil {
		return err
	}
	us := (int64(d) + 999) / 1000
	v, err := r.eval(ctx, pauseScript, ks.keys, []any{us, r.marginMs(), r.capUs(), r.channel})
	if err == nil {
		var left int64
		if left, err = r.leftReply("pause", v); err == nil {
			r.up(ks)
			ks.mu.Lock()
			ks.pauseUntil = max(ks.pauseUntil, r.now()+left*1000)
			ks.mu.Unlock()
			return nil
		}
	}
	if r.failed(ctx, ks, err) {
		return ctx.Err()
	}
	return err
}

// leftReply checks that v, the reply of a script that returns the time
// left of a pause, is an integer from 0 to the cap, in µs.
func (r *Redis) leftReply(script string, v any) (int64, error) {
	n, ok := v.(int64)
	if !ok || n < 0 || n > r.capUs() {
		return 0, &ReplyError{Script: script, Reply: v, Reason: "want an integer from 0 to the cap"}
	}
	return n, nil
}

// pauseCoalesce is how long the answer of one PausedFor call to Redis
// serves the other calls on the same key.
const pauseCoalesce = 5 * time.Millisecond

// PausedFor returns how long from now every request on key must still wait
// because of the shared pause; 0 when there is none. It implements
// headway.SharedPauseChecker: a Transport asks after a request slept on its
// reservation, so that a pause set meanwhile, by any process, holds it.
//
// It answers from what this process knows of the pause, without a round
// trip, while the quota's subscription to the pauses every process
// publishes has been unbroken since the key's pause was last read from
// Redis (by a reservation, or by PausedFor), within 5ms of such a read,
// and while Redis is unavailable. Otherwise it asks Redis. An error from
// Redis is returned along with the local answer.
func (r *Redis) PausedFor(ctx context.Context, key string) (time.Duration, error) {
	if r.closed.Load() {
		return 0, ErrClosed
	}
	ks := r.state(key)
	now := r.now()
	if ks.recut(now) || ks.unhold(now) {
		// Booked at a pace cut since: no pause, but the request reserves
		// again, as one held by a pause does.
		return time.Nanosecond, nil
	}
	last := ks.checked.Load()
	if r.subscribed(last) || now-last < int64(pauseCoalesce) || !ks.checked.CompareAndSwap(last, now) || r.usable(ks) != nil {
		return ks.pausedFor(r.now()), nil
	}
	v, err := r.eval(ctx, pausedScript, ks.keys, []any{r.capUs()})
	if err == nil {
		var left int64
		if left, err = r.leftReply("paused", v); err == nil {
			r.up(ks)
			ks.mu.Lock()
			ks.pausedTill(r.now() + left*1000)
			ks.mu.Unlock()
			return ks.pausedFor(r.now()), nil
		}
	}
	if r.failed(ctx, ks, err) {
		return ks.pausedFor(r.now()), ctx.Err()
	}
	return ks.pausedFor(r.now()), err
}

// pausedFor returns the time left at now of the last pause this process
// knows of.
func (ks *keyState) pausedFor(now int64) time.Duration {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return time.Duration(max(ks.pauseUntil-now, 0))
}

// Close stops the heartbeat, withdraws this process's announcements, and
// makes every later call fail with ErrClosed. It returns once the heartbeat
// goroutine has ended. Calling it again does nothing.
func (r *Redis) Close() error {
	r.closeOnce.Do(func() {
		r.closed.Store(true)
		if r.metricsReg != nil {
			_ = r.metricsReg.Unregister()
		}
		close(r.stop)
		<-r.done
		r.unsubscribe()
		r.mu.Lock()
		clear(r.keys)
		clear(r.byHash)
		r.mu.Unlock()
		if r.usable(nil) == nil {
			_, _ = r.eval(context.Background(), heartbeatScript, []string{r.procsKey}, r.beatArgs(true))
		}
	})
	return nil
}

// state returns the state of key, creating it if needed.
func (r *Redis) state(key string) *keyState {
	now := r.now()
	r.mu.Lock()
	ks := r.keys[key]
	if ks == nil {
		ks = &keyState{leaseSem: make(chan struct{}, 1)}
		ks.checked.Store(math.MinInt64 / 2) // never: PausedFor asks Redis first
		ks.hashKey, _ = r.KeyNames(key)
		ks.keys = []string{ks.hashKey}
		r.keys[key] = ks
		r.byHash[ks.hashKey] = ks
		if r.live.Load() == 0 {
			select { // announce the process at once
			case r.kick <- struct{}{}:
			default:
			}
		}
	}
	r.mu.Unlock()
	ks.lastUsed.Store(now)
	return ks
}

// argsFor returns reserveScript's arguments for up to slots slots of cost
// units each, within withinUs µs, with the floors of a fallback (see
// keyState.floors).
func argsFor(limits []headway.Limit, cost, slots int, margin, withinUs, capUs, pauseFloor int64, floors []int64) []any {
	return scaledArgs(limits, cost, 1, slots, margin, withinUs, capUs, pauseFloor, floors)
}

// scaledArgs is argsFor with every limit's units spent mult times (see
// graceMult).
func scaledArgs(limits []headway.Limit, cost, mult, slots int, margin, withinUs, capUs, pauseFloor int64, floors []int64) []any {
	args := make([]any, 0, 5+5*len(limits))
	args = append(args, slots, margin, withinUs, capUs, pauseFloor)
	for i, l := range limits {
		iv := intervalUs(l)
		units := int64(cost)
		if l.Unweighted {
			units = 1
		}
		args = append(args, fieldOf(l, iv), iv, burstOf(l), units*int64(mult), floors[i])
	}
	return args
}

// oneArgsFor returns reserveOneScript's arguments for a request of cost
// units under the one limit l. The caller locks ks.
func (ks *keyState) oneArgsFor(l headway.Limit, cost int, margin int64) []any {
	if l.Unweighted {
		cost = 1
	}
	if ks.oneArgs != nil && l == ks.oneLimit && cost == ks.oneCost {
		return ks.oneArgs
	}
	iv := intervalUs(l)
	units := int64(cost)
	// Room for the caller's last argument: appending it never writes into
	// the cached array.
	ks.oneArgs = slices.Clip([]any{fieldOf(l, iv), (burstOf(l) - units) * iv, units * iv, margin * 1000})
	ks.oneLimit, ks.oneCost = l, cost
	return ks.oneArgs
}

// intervalUs returns l's interval in µs, rounded up: never faster than the
// limit.
func intervalUs(l headway.Limit) int64 { return max((int64(l.Interval())+999)/1000, 1) }

// fieldOf returns the name of the hash field that holds l's TAT, given its
// interval in µs.
func fieldOf(l headway.Limit, iv int64) string {
	f := strconv.FormatInt(iv, 10) + ":" + strconv.FormatInt(burstOf(l), 10)
	if l.Unweighted {
		f += ":r"
	}
	return f
}

// oneUnit reports whether a request of cost spends one unit of every limit.
func oneUnit(limits []headway.Limit, cost int) bool {
	if cost == 1 {
		return true
	}
	for _, l := range limits {
		if !l.Unweighted {
			return false
		}
	}
	return true
}

// degrade decides a reservation asked for at start (monotonic ns) without
// Redis, by the FailureMode. The fallback spends nothing on a wait longer
// than what is left of within since start (a call to Redis may have taken
// some of it), and then returns the wait counted from start: longer than
// within, as the caller reads it.
func (r *Redis) degrade(ks *keyState, limits []headway.Limit, cost int, within time.Duration, start int64, err error) (time.Duration, error) {
	var re *ReplyError
	if !errors.As(err, &re) && !errors.Is(err, ErrUnavailable) {
		err = &UnavailableError{Op: "reserve", Err: err}
	}
	switch r.cfg.mode {
	case FailOpen:
		r.stats.degraded.Add(1)
		r.stats.reservations.Add(1)
		return 0, nil
	case FailClosed:
		return 0, err
	}
	r.stats.degraded.Add(1)
	r.stats.reservations.Add(1)
	now := r.now()
	ks.mu.Lock()
	if len(limits) == 0 {
		limits = ks.paceLimits() // what the fleet learned holds while Redis is away
	}
	if !ks.fallback {
		// Entering fallback: empty buckets, from the latest shared
		// departure this process knows of, or may expect.
		ks.local.start(limits, r.fallbackShare(), ks.fallbackFrom(now))
		ks.fallback = true
	} else {
		ks.local.configure(limits, r.fallbackShare(), now)
	}
	left := int64(within) - (now - start)
	d := ks.local.reserve(now, ks.pauseUntil, int64(cost), left)
	ks.mu.Unlock()
	if d-now > left {
		return time.Duration(d - start), nil // nothing spent
	}
	return time.Duration(d - now), nil
}

// callBound returns how long a call to Redis made under ctx may take: the
// timeout, and no more than half the time left before ctx's deadline, so
// that a request whose Redis does not answer keeps the other half for the
// fallback to pace and send it. cut reports whether the request's share,
// not the timeout, is the bound.
func (r *Redis) callBound(ctx context.Context) (d time.Duration, cut bool) {
	d = r.cfg.timeout
	if dl, ok := ctx.Deadline(); ok {
		if share := time.Until(dl) / 2; share < d {
			return max(share, 0), true
		}
	}
	return d, false
}

// A cutShort is the cause of an UnavailableError for a call that Redis did
// not answer within its request's share of the time left (see callBound):
// Redis is slower than the request can wait, which does not say that it
// is away.
type cutShort struct {
	share time.Duration
	err   error
}

func (e *cutShort) Error() string {
	return "no answer within the request's share of its deadline (" + e.share.String() + "): " + e.err.Error()
}

func (e *cutShort) Unwrap() error { return e.err }

// eval runs script on keys within the bound of callBound.
func (r *Redis) eval(ctx context.Context, script *redis.Script, keys []string, args []any) (any, error) {
	bound, cut := r.callBound(ctx)
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	r.stats.roundTrips.Add(1)
	var v any
	var err error
	if r.guard {
		type result struct {
			v   any
			err error
		}
		ch := make(chan result, 1)
		go func() {
			v, err := script.Run(ctx, r.c, keys, args...).Result()
			ch <- result{v, err}
		}()
		select {
		case res := <-ch:
			v, err = res.v, res.err
		case <-ctx.Done():
			err = ctx.Err()
		}
	} else {
		v, err = script.Run(ctx, r.c, keys, args...).Result()
	}
	if err != nil {
		r.stats.errors.Add(1)
		if cut && ctx.Err() != nil && parent.Err() == nil {
			err = &cutShort{share: bound, err: err}
		}
		return nil, &UnavailableError{Op: scriptName(script), Err: err}
	}
	return v, nil
}

func scriptName(s *redis.Script) string {
	switch s {
	case reserveScript, reserveOneScript:
		return "reserve"
	case pauseScript:
		return "pause"
	case pausedScript:
		return "paused"
	case learnScript:
		return "learn"
	case cutScript:
		return "cut"
	case outageDownScript, outageUpScript:
		return "outage"
	case probeTurnScript:
		return "probe"
	}
	return "heartbeat"
}

// health says whether Redis, or one key's hash in it, may be asked: it is
// up, or it has been down for the retry interval and this caller is the
// one to try it again.
type health struct {
	downUntil atomic.Int64 // monotonic ns; 0: up
	probing   atomic.Bool
	lastErr   atomic.Pointer[error]
}

func (h *health) usable(now int64) error {
	until := h.downUntil.Load()
	if until == 0 {
		return nil
	}
	if now >= until && h.probing.CompareAndSwap(false, true) {
		return nil
	}
	if p := h.lastErr.Load(); p != nil {
		return *p
	}
	return ErrUnavailable
}

// up notes a call that succeeded, and reports whether it ends a fall.
func (h *health) up() bool {
	if h.downUntil.Load() == 0 {
		return false
	}
	was := h.downUntil.Swap(0) != 0
	h.probing.Store(false)
	return was
}

// down notes a call that failed, and reports whether it begins a fall.
func (h *health) down(until int64, err error) bool {
	h.lastErr.Store(&err)
	was := h.downUntil.Swap(max(until, 1)) == 0
	h.probing.Store(false)
	return was
}

func (h *health) isDown() bool { return h.downUntil.Load() != 0 }

// usable returns nil when the hash of ks (nil: any) may be asked: Redis
// and the key are up, or the one down has been so for the retry interval
// and this caller is the one to try again.
func (r *Redis) usable(ks *keyState) error {
	now := r.now()
	if err := r.health.usable(now); err != nil {
		return err
	}
	if ks != nil {
		return ks.health.usable(now)
	}
	return nil
}

// up notes a successful call on the hash of ks (nil: none in particular).
func (r *Redis) up(ks *keyState) {
	if r.health.up() {
		r.logInfo("headway/sharedquota: Redis is back: shared pacing resumes")
		select { // announce the process, and count those back, at once
		case r.kick <- struct{}{}:
		default:
		}
	}
	if ks != nil && ks.health.up() {
		r.logInfo("headway/sharedquota: a key's hash in Redis is usable again: that key is shared again")
	}
}

// failed notes a failed call on the hash of ks (nil: none in particular)
// and reports whether it failed because the caller gave up (its ctx ended),
// which says nothing of Redis. An error that only this key's hash causes
// (it holds a value of another type: WRONGTYPE; a script failed on what it
// holds) leaves that key alone for the retry interval, deciding by the
// FailureMode, and the other keys shared; so does a reply of the wrong
// shape (Redis answered: it is up). Any other failure marks Redis down.
func (r *Redis) failed(ctx context.Context, ks *keyState, err error) (callerGone bool) {
	if ctx.Err() != nil {
		r.health.probing.Store(false)
		if ks != nil {
			ks.health.probing.Store(false)
		}
		return true
	}
	// Whatever the error, this call's turn to try again (if it had one)
	// ends here: a turn left taken keeps Redis, or the key, down for good.
	if ks != nil {
		ks.health.probing.Store(false)
	}
	if cs := (*cutShort)(nil); errors.As(err, &cs) {
		// Slower than its request could wait, which may be a moment: the
		// request falls back alone, and Redis stays as it was.
		r.health.probing.Store(false)
		return false
	}
	until := r.now() + int64(r.cfg.retry)
	if errors.Is(err, ErrBadReply) || keyError(err) {
		// Redis answered: it is up (this call may have been the one to
		// try it again); the reply, or what one key holds, is wrong.
		r.up(nil)
		if ks != nil && keyError(err) && ks.health.down(until, err) {
			r.logWarn("headway/sharedquota: a key's hash in Redis is unusable: that key alone falls back to its failure mode",
				slog.String("mode", r.cfg.mode.String()), slog.String("err", err.Error()))
		}
		return false
	}
	if r.health.down(until, err) {
		r.liveNow.Store(0) // who will be back is not known
		r.logInfo("headway/sharedquota: Redis unavailable: each key falls back to its failure mode",
			slog.String("mode", r.cfg.mode.String()), slog.String("err", err.Error()))
	}
	r.reloadSlots()
	return false
}

// reloadSlots makes a Cluster client read the slot map again after a
// failed call, once per retry interval at most: a master that died keeps
// its slots in the client's map until then, and go-redis reads the map
// again by itself only every few seconds, or on a MOVED that a dead master
// never sends. The reload runs in the background (go-redis's own).
func (r *Redis) reloadSlots() {
	if r.cluster == nil {
		return
	}
	now, last := r.now(), r.reloadedAt.Load()
	if now-last < int64(r.cfg.retry) || !r.reloadedAt.CompareAndSwap(last, now) {
		return
	}
	r.cluster.ReloadState(context.Background())
}

// keyError reports whether err is Redis's answer to what one key holds,
// not a fault of Redis: a WRONGTYPE, or a script that failed at run time
// (not a busy server, which is everyone's).
func keyError(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "WRONGTYPE") ||
		strings.HasPrefix(msg, "ERR") && strings.Contains(msg, "script")
}

func (r *Redis) now() int64 { return int64(time.Since(r.base)) }

// capUs is the cap on waits, in µs: the longest wait a reservation spends
// a slot on, and the longest pause.
func (r *Redis) capUs() int64 { return int64(r.cfg.maxWait / time.Microsecond) }

// maxReplyUs is the longest wait, in µs, a reserve script can return: the
// cap, and what one request's units of the slowest limit add to it (a
// week at most), however the hash was tampered with.
func (r *Redis) maxReplyUs() int64 { return r.capUs() + int64(7*24*time.Hour/time.Microsecond) }

func (r *Redis) marginMs() int64 { return max(int64(r.cfg.ttlMargin/time.Millisecond), 1) }
