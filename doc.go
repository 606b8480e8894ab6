// Package headway paces outbound HTTP requests to the rate limits of the
// APIs they call, so that a program stays under its quota instead of
// collecting 429s, bans and retry storms.
//
// A [Transport] is an [http.RoundTripper] that wraps another one. It groups
// requests by key (the host, by default: see [KeyFunc]) and gives each key a
// pacer, a bounded FIFO queue and an optional bound on the requests in
// flight. A request leaves as soon as every [Limit] of its key allows it;
// otherwise it waits its turn in the queue, or fails at once with a typed
// error when it could not be sent in time. A request that fails this way is
// never sent.
//
//	package main
//
//	import (
//		"context"
//		"errors"
//		"log"
//		"net/http"
//		"time"
//
//		"github.com/headway-go/headway"
//	)
//
//	func main() {
//		t := headway.New(nil, // nil: http.DefaultTransport
//			headway.WithLimit(
//				headway.PerSecond(10).WithBurst(5),   // 10 a second, 5 at once after a rest
//				headway.Per(5000, time.Hour).WithBurst(500), // and 5,000 an hour, 500 at once
//			),
//			headway.WithQueue(headway.QueueOptions{MaxLen: 100, MaxWait: 30 * time.Second}),
//			headway.WithMaxInFlight(4),
//		)
//		client := &http.Client{Transport: t}
//
//		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
//		defer cancel()
//		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/items", nil)
//		if err != nil {
//			log.Fatal(err)
//		}
//		resp, err := client.Do(req)
//		var we *headway.WaitError
//		switch {
//		case errors.As(err, &we):
//			log.Fatalf("not sent: it would wait %v, its deadline allows %v", we.Wait, we.Allowed)
//		case errors.Is(err, headway.ErrQueueFull):
//			log.Fatal("not sent: too many requests waiting")
//		case err != nil:
//			log.Fatal(err) // a context or network error
//		}
//		defer resp.Body.Close() // reading to EOF or closing frees the in-flight slot
//
//		// A final 429 is a response, not an error.
//		if resp.StatusCode == http.StatusTooManyRequests {
//			log.Printf("throttled anyway; Retry-After: %q", resp.Header.Get("Retry-After"))
//		}
//	}
//
// # Limits and costs
//
// A [Limit] is built with [Per] (Per(5000, time.Hour)), [PerSecond] or
// [Every], and given a burst with [Limit.WithBurst]; without one, requests
// leave evenly spaced, so give a limit over a long window (an hourly quota) a
// burst, or it paces to one request per Period/Count. [WithLimit] sets the
// limits of every key, [WithHostLimit] those of one host. A request spends
// its cost on all the limits of its key together: one unit, or what
// [WithCost] puts in its context, or what [WithCostFunc] computes. A limit
// made with [Limit.Requests] counts requests whatever their cost.
//
// # Errors
//
// [ErrQueueFull]: the key's queue is full. [*WaitError] (matching
// [ErrWaitTooLong] and [context.DeadlineExceeded]): the known wait exceeds the
// request's deadline or [QueueOptions.MaxWait]. [*CostError] (matching
// [ErrCostTooLarge] or [ErrInvalidCost]): the cost can never fit. A request
// whose context ends while it waits fails with the context's error. An
// [http.Client] wraps all of them in a [*net/url.Error]; [errors.Is] and
// [errors.As] see through it.
//
// # Response signals
//
// Package [github.com/headway-go/headway/ratelimitheader] reads what a
// response says about rate limiting (Retry-After, the IETF RateLimit fields,
// vendor headers) into a [ratelimitheader.Signal]; it imports nothing of
// headway and serves any HTTP client. A [ratelimitheader.Parser] with more
// [ratelimitheader.Dialect] values teaches it other vendors. The
// Transport reads them after every response: a throttle pauses the key (or
// every key of its credential on the host, for a global scope, which is
// then learned as a window they share) and its request is sent again first when the
// pause ends ([WithRetry]); a stated quota is spent, then waited for; bare
// 429s slow a key without limits down, while a key with configured limits
// goes back to them after a rare throttle's pause. Every wait a server
// names is capped ([WithMaxServerWait]): a longer one holds the key for the
// cap at most, and fails the key's requests at once with a [*WaitError]
// while what is left of it is longer. [WithDialects] sets the dialects it
// reads.
//
// What a server states is what it knew when it counted the request: the
// requests still in flight are spent too, and a margin that grows with
// each prediction the server proves wrong is kept back. A reset rounded to
// the second bounds the truth; the key waits for its latest instant, on
// the server's clock as the Date of many responses measure it. A stated
// limit is an upper bound: until a key's first answer, it sends one
// request. Answers tell a bucket that refills from a fixed window that
// resets (resets that stay put, quota that comes back all at once), and a
// window is spent, then waited for to its boundary. Routes the server says
// share a bucket (Discord's X-RateLimit-Bucket) share its pace; a server
// that names only its waits, to the millisecond or as a date, has its
// window learned from the spacing of its throttles. A server that refuses
// requests past a number it works on at once (a concurrency limit) refuses
// with the same number of the key's requests at work each time: a key
// without limits counts them, and holds its requests out to that number
// ([WithMaxInFlight] sets it where it is known).
//
// # Retries, breakers, shared quotas, presets
//
// [WithRetry] sends a request again when that is safe: a throttled one when
// its key's pause ends, ahead of new work; a 502, 503 or 504 or a transport
// error of an idempotent one after a jittered backoff; within a retry budget
// per key. [WithBreaker] gives each key a circuit breaker that fails requests
// at once with a [*CircuitOpenError] while its server is down, or, with
// [BreakerSettings.Hold], holds them in the queue behind its probe.
// [WithSharedQuota] shares each key's quota and pauses across processes
// (package sharedquota implements it over Redis), and, through the optional
// [SharedPauseChecker] and [SharedLearner], holds requests already reserved
// when a pause comes and shares what responses say. A [Preset] configures
// an API in one option: its limits, its key and its host; package preset
// has those of well-known APIs, such as preset.GitHub and preset.OpenAI.
//
// # Outages
//
// A failure that shows a key's host is down (a 5xx but 501 and 505, a 503
// or 529 that names no delay, a broken or refused connection, a timeout;
// not a 4xx, not a throttle) moves the key into probing: one request in
// flight at a time, each after a backoff that grows from the first failure
// ([RetryOptions.ProbeInterval], [RetryOptions.MaxProbeInterval]).
// The key's other requests wait in its queue, in order; one whose deadline
// or [QueueOptions.MaxWait] comes before the next probe fails at once with a
// [*WaitError] whose NextProbe says when it goes. A retry of a request that
// met the outage waits at the front of the queue, so retries add no probes.
// Each failed probe spends one of its request's attempts, unless the key's
// breaker holds ([BreakerSettings.Hold]): then an outage costs time, not
// attempts, and only a request's deadline, [RetryOptions.MaxElapsed] and
// MaxWait end its wait.
// The first probe that gets another answer ends the outage, and the queue
// drains at the key's pace at once. A key whose requests go unanswered for
// much longer than usual (a host that accepts and hangs) sends no more
// until an answer or a timeout comes; and once two of its callers have
// given up (a deadline, a cancel) on requests the host left unanswered
// for that long, with no answer from the host since they left, the host
// is failing: the key probes it as in any outage, and its breaker counts
// a failure for each. So is a host that answers some requests and hangs
// the others, once callers gave up that long after their requests left
// on half of the key's recent requests, 8 at least. Such an outage ends
// when 3 probes in a row are answered. A [SharedQuota] that is also a
// [SharedProber] (sharedquota's is) shares the outage among processes: the
// fleet holds its queues and sends one probe at a time, not one per process.
//
// # Throttles in a row
//
// Some servers punish a client that exceeds their limit: they block its key
// for much longer than their window, saying so, or naming only the
// window's wait, or nothing, and some restart the block with each request
// that arrives during it. So from a throttle on, until a request sent after
// it gets another answer, a key sends one request at a time; each one
// throttled again doubles the pause before the next (from the wait the
// server named, or 200ms), up to [WithMaxServerWait]'s cap. A block of any
// length, restarted by every request, sees a handful of them. A request
// whose deadline comes before the next try fails at once with a
// [*WaitError]. A 403 is a throttle only when the response says so
// (Retry-After, a quota of 0 left, or a dialect's message, such as GitHub's
// secondary limit); any other 403 is returned as it is, never retried.
//
// # Seeing it work
//
// [WithMeterProvider] reports OpenTelemetry metrics (queue wait, queue
// length, requests by outcome, pace, pauses, breaker states), [WithLogger]
// logs state changes and pauses to a [log/slog.Logger], and [WithHooks]
// calls back on throttles, retries, pauses and breaker changes. All are off
// by default and cost nothing then; keys appear in none of them unless asked
// for, and then only hashed.
//
// # Concurrency
//
// A Transport is safe for concurrent use by multiple goroutines, and should
// be shared: keys only pace the requests that go through the same Transport.
// It keeps the [http.RoundTripper] contract: it never modifies the request,
// closes the request body on every path, and returns every response it
// obtained, whatever its status, with a nil error. [ratelimitheader.Parse] is safe for
// concurrent use, and so is a [ratelimitheader.Parser] as long as its fields do not
// change.
package headway
