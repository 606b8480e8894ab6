package fakeserver

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Penalty is how a Server punishes a key that exceeds its limit, on top of
// the limiter (whatever its Algorithm): a block, and a ban for a key that
// keeps offending. The zero value punishes nothing.
//
// A request of a blocked or banned key is answered at once, reaches neither
// the limiter nor the Handler, spends nothing, and counts in Stats.Blocked
// or Stats.Banned. Faults come first: a request that meets an outage counts
// there.
type Penalty struct {
	// Block is how long a key is blocked after a request its limit rejects
	// (a penalty box: 60 s on a limit of 1 s, say). During the block every
	// request of the key is rejected as BlockStates says. Zero or negative
	// means no block.
	Block time.Duration

	// BlockStates is what a rejection says of the wait, the one that
	// begins a block and those during it. The zero value, StateBlockEnd,
	// states the block's end.
	BlockStates BlockStatement

	// Extend makes each request that arrives during a block or a ban
	// restart it from that request: a client that keeps trying is never
	// let in.
	Extend bool

	// BanAfter is the number of violations (requests the limit rejects,
	// or that arrive during a block) within BanSpan after which the key is
	// banned for Ban. Zero or negative means no ban.
	BanAfter int
	// BanSpan is the span BanAfter violations must fall within. Zero or
	// negative means one minute.
	BanSpan time.Duration
	// Ban is how long a ban lasts. Zero or negative means five minutes.
	Ban time.Duration
	// BanStatus is the status of every answer during a ban. Zero means 403
	// Forbidden; 429 is the other usual one.
	BanStatus int
	// BanRetryAfter makes the answers during a ban state its end in
	// Retry-After, in whole seconds (as GitHub's secondary limit does).
	BanRetryAfter bool
	// BanBody is the body of the answers during a ban, with Content-Type
	// application/json, such as a message that names a rate limit. Empty
	// means none.
	BanBody string
}

// BlockStatement is what a Server's rejections say of the wait during a
// block (see Penalty).
type BlockStatement int

const (
	// StateBlockEnd rejects as the Dialect does, with the wait until the
	// block ends: its Retry-After, or its reset and a remaining of 0.
	StateBlockEnd BlockStatement = iota
	// StateWindow rejects as the Dialect does, with the wait of one Window
	// (StatedWindow), as a server that reports its limiter's wait and not
	// its block: a client that trusts it comes back into the block.
	StateWindow
	// StateNothing rejects with a bare 429: no header, no body.
	StateNothing
)

var blockStatementNames = []string{"block-end", "window", "nothing"}

// String returns the statement's name as ParseBlockStatement accepts it,
// such as "window".
func (b BlockStatement) String() string {
	if b >= 0 && int(b) < len(blockStatementNames) {
		return blockStatementNames[b]
	}
	return fmt.Sprintf("BlockStatement(%d)", int(b))
}

// ParseBlockStatement returns the BlockStatement named s: "block-end",
// "window" or "nothing".
func ParseBlockStatement(s string) (BlockStatement, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	for i, name := range blockStatementNames {
		if s == name {
			return BlockStatement(i), nil
		}
	}
	return 0, fmt.Errorf("fakeserver: unknown block statement %q (want one of %s)", s, strings.Join(blockStatementNames, ", "))
}

// withDefaults fills in p's defaults.
func (p Penalty) withDefaults() Penalty {
	if p.BanAfter > 0 {
		if p.BanSpan <= 0 {
			p.BanSpan = time.Minute
		}
		if p.Ban <= 0 {
			p.Ban = 5 * time.Minute
		}
		if p.BanStatus == 0 {
			p.BanStatus = http.StatusForbidden
		}
	}
	return p
}

// punishment is the penalty state of one key, Unix ns.
type punishment struct {
	blockedUntil int64
	bannedUntil  int64
	violations   []int64 // the last BanAfter violations, oldest first
}

// punished reports whether c is blocked or banned at t.
func (c *client) punished(t int64) bool {
	return c != nil && (t < c.pen.blockedUntil || t < c.pen.bannedUntil)
}

// violate counts a violation of c at t, and bans it if it is one too many.
// Called with s.mu held.
func (s *Server) violate(c *client, t int64) {
	p := &s.cfg.Penalty
	if p.BanAfter <= 0 {
		return
	}
	v := append(c.pen.violations, t)
	if len(v) > p.BanAfter {
		v = v[len(v)-p.BanAfter:]
	}
	c.pen.violations = v
	if len(v) == p.BanAfter && t-v[0] < int64(p.BanSpan) {
		c.pen.bannedUntil = t + int64(p.Ban)
		c.pen.violations = v[:0]
		s.stats.Bans++
	}
}

// punish answers a request of c, a key blocked or banned at t, in state st
// (the key's policy), adding headers to h. Called with s.mu held.
func (s *Server) punish(c *client, t int64, st State, h http.Header, v verdict) verdict {
	p := &s.cfg.Penalty
	v.kind = verdictRespond
	if t < c.pen.bannedUntil {
		s.stats.Banned++
		if p.Extend {
			c.pen.bannedUntil = t + int64(p.Ban)
		}
		left := time.Duration(c.pen.bannedUntil - t)
		v.status = p.BanStatus
		var wait time.Duration
		if p.BanRetryAfter {
			secs := ceilSeconds(left)
			h.Set("Retry-After", strconv.FormatInt(secs, 10))
			wait = time.Duration(secs) * time.Second
		}
		if p.BanBody != "" {
			h.Set("Content-Type", "application/json")
			v.body = []byte(p.BanBody + "\n")
		}
		s.told(c, t, v, wait, wait > 0, false, h)
		return v
	}
	s.stats.Blocked++
	if p.Extend {
		c.pen.blockedUntil = t + int64(p.Block)
	}
	s.violate(c, t)
	return s.blockAnswer(c, t, st, h, v)
}

// blockAnswer is the rejection of a request of c at t in a block, as
// Penalty.BlockStates says. Called with s.mu held.
func (s *Server) blockAnswer(c *client, t int64, st State, h http.Header, v verdict) verdict {
	v.kind = verdictRespond
	if s.cfg.Penalty.BlockStates == StateNothing {
		clear(h)
		v.status, v.body = http.StatusTooManyRequests, nil
		return v
	}
	wait := time.Duration(c.pen.blockedUntil - t)
	if s.cfg.Penalty.BlockStates == StateWindow {
		wait = s.cfg.StatedWindow
	}
	st.Allowed, st.Remaining = false, 0
	if st.Capacity == 0 { // a request the limiter did not see
		st.Capacity = s.cfg.Limit
		if s.cfg.Algorithm == TokenBucket || s.cfg.Algorithm == LeakyBucket {
			st.Capacity = s.cfg.Burst
		}
	}
	st.ResetAfter, st.NextAfter, st.RetryAfter = wait, wait, wait
	clear(h)
	s.cfg.Dialect.Header(h, st)
	rej := s.cfg.Dialect.Reject(h, st)
	v.status, v.body = rej.Status, rej.Body
	s.told(c, t, v, cmp.Or(rej.Wait, wait), rej.Wait > 0, false, h)
	return v
}

// told notes that the answer v to a request of c at t (c the token's
// limiter, if global) told it to wait wait (on the server's clock; zero:
// nothing), for
// Stats.Early, and, if the answer names that wait (a Retry-After, or a
// reset with nothing left: what a Rejection.Wait or a ban's Retry-After
// says), for Stats.Ignored and WaitHeader. Headers alone name nothing: a
// remaining of 0 without a reset, as Salesforce and HubSpot send, does not
// say when the quota comes back. Called with s.mu held.
func (s *Server) told(c *client, t int64, v verdict, wait time.Duration, named, global bool, h http.Header) {
	if wait <= 0 {
		return
	}
	wait = time.Duration(s.clock.span(int64(wait))) // stated on the server's clock
	c.notBefore = max(c.notBefore, t+int64(wait))
	if !named {
		return
	}
	c.heard(t+int64(v.delay), t+int64(wait))
	if s.cfg.TellWaits {
		tell := strconv.FormatInt(t+int64(wait), 10)
		if global {
			tell += "; global"
		}
		h.Set(WaitHeader, tell)
	}
}
