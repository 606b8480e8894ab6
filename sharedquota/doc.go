// Package sharedquota keeps headway's pacing decisions in Redis, so that
// many processes calling one API with one token share one quota and one
// pause: replicas of a service, workers of a batch job.
//
//	rdb := redis.NewClient(&redis.Options{
//		Addr:                  "127.0.0.1:6379",
//		ContextTimeoutEnabled: true, // let the quota's timeout reach the socket
//	})
//	q := sharedquota.NewRedis(rdb)
//	defer q.Close()
//	client := &http.Client{Transport: headway.New(http.DefaultTransport,
//		headway.WithLimit(headway.PerSecond(100).WithBurst(10)),
//		headway.WithKey(byToken), // the same key, naming the token, in every process
//		headway.WithSharedQuota(q),
//	)}
//
// # Admission
//
// Each decision is one Lua script, run atomically by Redis: GCRA over all
// of the request's limits at once, as the in-process pacer does. A request
// leaves at the latest of now, the shared pause, and, for each limit,
// TAT + units·T − burst·T; only that departure is committed. The clock is
// Redis's TIME, never a client's, so processes whose clocks disagree still
// agree. Times are kept in whole microseconds, intervals rounded up. A key
// with one limit, the common case, runs a leaner script of three Redis
// commands (TIME, HMGET, HSET) whose arithmetic the client did ahead, with
// the same fields: processes configured with one limit or several share one
// quota.
//
// A request spends a slot only if it can wait for it: Reserve takes the
// longest wait the caller can afford (its deadline, what is left of its
// queue's MaxWait, the Transport's cap on waits) and, when the slot is
// further off, spends nothing and says so, so that an overloaded fleet
// does not push its shared schedule ahead with slots nobody uses. No wait
// is longer than 10 minutes (the default of headway.WithMaxServerWait): a longer pause is
// shortened to it.
//
// Every value read back from Redis is checked before it is used (a finite,
// non-negative number, no further ahead than any process writes), and one
// that fails is repaired; replies are checked too. A key whose hash Redis
// refuses (WRONGTYPE) falls back alone; the other keys stay shared.
//
// Every key in Redis has a TTL of about the time until its bucket is full
// again, plus a second. A quota's name carries a hash tag made of a
// SHA-256 of the user's key (which may be a credential, and never appears
// in Redis; WithSalt makes it an HMAC under a secret), so that a quota's
// state lives in one Cluster slot:
//
//	headway:{3f1c...}:q  hash: one TAT per limit, the pause, and hw
//	                     (Redis's clock when it was last written)
//	headway:procs        sorted set: the live processes, for every key
//
// Scripts run with go-redis's Script.Run: EVALSHA, and EVAL when Redis has
// lost its script cache (SCRIPT FLUSH, a restart, a failover). Any
// redis.UniversalClient works: a single node, Sentinel, Cluster, Ring.
//
// # Leases
//
// At high rates, WithLease makes a process reserve a batch of consecutive
// slots in one round trip and hand them out itself, as Doorman and
// Gubernator do: with leases of 10, Redis sees a tenth of the requests.
// Each slot keeps its place in the shared schedule, and a slot not used
// soon after its time is dropped, so the fleet exceeds the limit by at most
// one lease per process, and only when a process's demand falls off
// mid-lease. A pause set elsewhere reaches a process at its next lease.
//
// # Pauses and what servers say
//
// Pause shares a 429's wait, and publishes it: every process subscribes
// (on <prefix>:pauses) and knows of a pause as soon as it is set; every
// reservation's reply carries the pause too. A request that reserved its
// slot before another process paused the key would still leave at that
// slot; Redis implements headway.SharedPauseChecker so that the Transport,
// after a request slept 10ms or more on its slot, checks whether the key is
// paused now (from memory while the subscription holds; otherwise one round
// trip, shared by the calls on a key within 5ms) and, if so, reserves again
// after the pause. Through a Ring, which cannot subscribe to every shard,
// the check always asks Redis.
//
// Redis implements headway.SharedLearner too: a policy a response states
// (Limit per Period) becomes a shared limit, one request every
// Period/Limit, that every process applies to a key for which it has no
// limit of its own. Its burst is what the server holds (Limit, or the most
// any process was told is left, plus one, when that is less), one request
// kept in reserve; it starts from what the server said was left, not from
// a full burst. An exhausted quota whose rate no policy states
// becomes a shared pause, as long as the process's model of the server
// expects it to last. Learn goes to Redis only with something new.
//
// A bare throttle (a 429 that states nothing) on a key without limits cuts
// the fleet's pace, once for the fleet, and so does any throttle of a key
// whose answers state what is left but no policy (the Transport passes it
// on as a bare one: each process paced by what it was told is left, the
// fleet overran it): the rule of the Transport's own
// (a cut to 0.9 of the rate measured, slow start after the first, then a
// cubic climb back over 12s), kept in Redis's clock so that every process
// paces by one rate and climbs along one curve. Each reservation without
// limits is counted, so that a cut measures what the whole fleet sent
// between two throttles (the server's rate, when its bucket was empty at
// both), and a throttle of a request reserved before the last cut changes
// nothing. A throttle of the first request since a cut measures no rate
// (it met the bucket the cut emptied, or a block): the pace stays, and the
// fleet's next request waits a backoff that doubles with each such
// throttle in a row, so that a block each request restarts ends; so does
// a throttle after one reservation a process at most (a round of the
// processes' tries into a block). A cut is
// published, and the requests booked at the old pace
// reserve again before they leave. With nothing learned, the fleet's first
// request goes alone and the other processes' wait for its answer (a
// second at most).
//
//	headway:{3f1c...}:q      also: li, lb, lu (the learned policy), lt (its TAT);
//	                         ar, ac, as, acn, at (the pace after bare throttles),
//	                         am, amn, ab (its backoff after throttles that measured nothing),
//	                         an, a1 (the count of reservations without limits),
//	                         po, ph (the fleet's probe)
//
// # Outages
//
// Redis implements headway.SharedProber too, so that a fleet probes a host
// that is down once, not once per process. The process whose request finds
// the host down records the outage beside the quota, with the time of the
// first probe, and publishes it; every process holds its queue as soon as
// it hears it (the Transport asks HostState, from memory, before each
// request leaves). When the probe is due, the first process to ask gets the
// turn (held one second at most, should it die) and sends the one probe; a
// failure puts the next one twice the interval on, up to the cap (200 ms up
// to 500 ms by default), and a success anywhere deletes the record
// and publishes the end, so that every process resumes within 10ms. Only
// the calls that start, end or take a turn of an outage go to Redis: over
// loopback, 4 processes in a 3 s outage made about a dozen of them. A
// process whose Redis is away, or which misses what is published (a Ring),
// probes on its own, or learns of the end when it next asks for the turn.
//
//	headway:{3f1c...}:o  hash: the outage: next probe, interval, turn holder
//
// Redis implements headway.SharedVerdict as well: a process whose trial
// of a pace found a key's 503s (naming no delay) to be a limit's refusals
// records it beside the quota, for as long as it tells (10 minutes), and
// publishes it; every process that hears it takes its own 503s of the
// key for a limit's from then on, rather than for a host gone down, whose
// trial would meet the refusals of the others' floods. A process that
// misses what is published tries a pace on its own.
//
//	headway:{3f1c...}:v  string: the verdict, with its TTL
//
// # When Redis is away
//
// Every call is bounded by a short timeout (50ms by default), and a call
// made for a request (its reservation, its pause check, its probe turn, or
// its wait for another request's lease call) by half the time the request
// has left before its deadline, if that is sooner: the other half is the
// fallback's, to pace and send the request. A call cut short by its
// request's share falls back for that request alone, since Redis may only
// be slower than the request could wait; any other failure, a call that
// ran its whole timeout included, marks Redis unavailable. After such a
// failure, the quota leaves Redis alone for a retry interval (250ms) and
// decides by its FailureMode: Fallback (the default) paces each key in this
// process at its limits divided by the number of live processes, which
// announce themselves in Redis once per heartbeat, in one call for all
// keys (if Redis was away from the start, four are assumed; see
// WithFallbackProcesses); its buckets start empty; FailOpen lets requests
// go; FailClosed fails them with an UnavailableError. Then one call (a
// reservation's or the heartbeat's) tries Redis again, and shared pacing
// resumes by itself once it answers: each key's first reservation records
// in Redis what its fallback spent and the pause it held, so that a Redis
// restarted empty hands out no fresh burst; and until the processes
// counted before are announced again (a few seconds at most), each
// reservation of a process back spends the shares of those still in
// fallback. A key without limits falls back to the pace Redis last applied
// to it, divided among the live processes.
//
// A process cut off from a Redis the others still reach (a partition)
// cannot tell it from Redis away for all: it falls back to its share,
// while the others share the whole limit without it. While k of n
// processes are cut off, the fleet sends up to (1 + k/n) times the limit
// (two processes at 20/s, one cut off: 30/s), and what they sent is not
// paid back when they return.
//
// A Redis emptied without a call failing (FLUSHALL, a restart between two
// calls that the client's own retries hide, a failover to a replica
// behind) shows it in the next reply: a first slot before the time the
// schedule was booked to, or a pause shorter than the one the process
// knows of. That reservation records again what the process knew (its
// pause, the schedule booked at least as far), one more round trip, and
// takes its slot after it; a policy the process shared and Redis no longer
// holds is shared again with the next response that states it.
//
// Redis's clock may step under the state it holds: a failover to a
// replica whose clock is behind the old primary's, an NTP step on its
// host. Every script that writes a quota's hash stores Redis's time with
// it (hw), and a script that finds the clock behind it moves every instant
// of the hash back by the difference, so that a jump back costs at most
// what the state held when it was last written (a bucket's time, the
// slots booked ahead, the pause left), never the jump. A jump back of
// more than a week is not believed: the checks repair what it left (a TAT
// reads as an empty bucket, a pause as none). An outage's next probe is
// never read as further than its interval, nor a probe turn as longer
// than its second. A jump forward cannot be told from time passing: the
// buckets look full (the fleet gets one fresh burst), and a pause may
// look over, or its hash expire; then each process that heard of the
// pause still holds it, and its next reservation records it again, as
// after a FLUSHALL. Processes of an earlier version do not write hw: what
// they wrote after the last hw stays ahead by the jump, within the checks.
//
// # Errors
//
// Errors are the sentinels ErrClosed, ErrUnavailable, ErrBadReply and
// ErrInvalidLimit, and the typed UnavailableError and ReplyError, which
// errors.Is matches to their sentinels.
package sharedquota
