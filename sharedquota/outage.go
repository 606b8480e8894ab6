package sharedquota

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/headway-go/headway"
)

var _ headway.SharedProber = (*Redis)(nil)

// probeLease is how long the process given the turn to probe a host holds
// it at most: should it die, or its probe never end, another takes the
// turn then.
const probeLease = time.Second

// outages is what a process knows of the outages of its keys' hosts, as
// the fleet reports them: from the replies of its own calls and from what
// other processes publish.
type outages struct {
	mu sync.Mutex
	m  map[string]*outageState // by the quota's hash name

	once sync.Once
	tok  string // see token
}

// outageState is one key's outage as this process knows it.
type outageState struct {
	down  bool
	next  int64  // monotonic ns: when the fleet's next probe is due
	turn  int64  // monotonic ns: when the turn another process holds ends
	heard uint64 // changes published and heard: a reply older than one is stale
	// limit: until when the key's overloads are a limit's refusals, as
	// the fleet told (monotonic ns; see TellLimit).
	limit int64
}

// outageOf returns the outage state of ks, creating it if needed.
func (r *Redis) outageOf(hash string) *outageState {
	r.outs.mu.Lock()
	defer r.outs.mu.Unlock()
	if r.outs.m == nil {
		r.outs.m = make(map[string]*outageState)
	}
	o := r.outs.m[hash]
	if o == nil {
		o = &outageState{}
		r.outs.m[hash] = o
	}
	return o
}

// outageKey returns the name of the hash that holds the outage of the
// quota named hash: the same hash tag, so the same slot.
func outageKey(hash string) string { return strings.TrimSuffix(hash, ":q") + ":o" }

// HostState returns what this process knows of the host of key, from
// memory: whether the fleet reports it down, and how long from now its
// next probe is due. It implements headway.SharedProber.
func (r *Redis) HostState(key string) (bool, time.Duration) {
	if r.closed.Load() {
		return false, 0
	}
	r.mu.Lock()
	ks := r.keys[key]
	r.mu.Unlock()
	if ks == nil {
		return false, 0
	}
	o := r.outageOf(ks.hashKey)
	now := r.now()
	r.outs.mu.Lock()
	defer r.outs.mu.Unlock()
	if !o.down {
		return false, 0
	}
	return true, time.Duration(o.next - now)
}

// HostDown records, for every process, that a request on key found its
// host down; it returns how long from now the fleet's next probe is due.
// It implements headway.SharedProber: the first report starts the fleet's
// outage, with its first probe after initial; until a turn is given, a
// report that asks for an earlier first probe moves it to initial from
// now; one from the process holding the probe turn ends the turn and puts
// the next probe twice the last interval from now, up to most. The
// schedule is not jittered (see headway's RetryOptions.ProbeInterval).
// initial and most are bounded by the cap on waits (see WithMaxWait).
func (r *Redis) HostDown(ctx context.Context, key string, initial, most time.Duration) (time.Duration, error) {
	if r.closed.Load() {
		return 0, ErrClosed
	}
	initial = min(max(initial, time.Millisecond), r.cfg.maxWait)
	most = min(max(most, initial), r.cfg.maxWait)
	mostUs := int64(most / time.Microsecond)
	ks := r.state(key)
	if err := r.usable(ks); err != nil {
		return 0, err
	}
	o := r.outageOf(ks.hashKey)
	heard := r.heardOf(o)
	v, err := r.eval(ctx, outageDownScript, []string{outageKey(ks.hashKey)}, []any{
		r.token(), int64(initial / time.Microsecond), mostUs, r.marginMs(), r.channel, ks.hashKey})
	if err == nil {
		w, ok := v.(int64)
		if !ok || w < 0 || w > 2*mostUs {
			err = &ReplyError{Script: "outage", Reply: v, Reason: "want an integer from 0 to twice the longest interval"}
		} else {
			r.up(ks)
			r.learnOutage(o, heard, true, w)
			return time.Duration(w) * time.Microsecond, nil
		}
	}
	if r.failed(ctx, ks, err) {
		return 0, ctx.Err()
	}
	return 0, err
}

// HostUp ends, for every process, the outage of key's host: a request sent
// after it was found down got an answer. It implements
// headway.SharedProber.
func (r *Redis) HostUp(ctx context.Context, key string) error {
	if r.closed.Load() {
		return ErrClosed
	}
	ks := r.state(key)
	o := r.outageOf(ks.hashKey)
	r.outs.mu.Lock()
	o.down, o.turn = false, 0
	o.heard++ // a reply to a call begun before is stale
	r.outs.mu.Unlock()
	if err := r.usable(ks); err != nil {
		return err
	}
	_, err := r.eval(ctx, outageUpScript, []string{outageKey(ks.hashKey)}, []any{r.channel, ks.hashKey})
	if err == nil {
		r.up(ks)
		return nil
	}
	if r.failed(ctx, ks, err) {
		return ctx.Err()
	}
	return err
}

// ProbeTurn asks for the turn to probe key's host, which the fleet reports
// down: it returns 0 when this process has it, for a second at most, or
// when no outage is on; otherwise the wait until the next probe is due, or
// the turn another process holds ends. While this process knows another
// holds the turn (and has heard of no change since), it answers from
// memory. It implements headway.SharedProber.
func (r *Redis) ProbeTurn(ctx context.Context, key string) (time.Duration, error) {
	if r.closed.Load() {
		return 0, ErrClosed
	}
	ks := r.state(key)
	o := r.outageOf(ks.hashKey)
	now := r.now()
	r.outs.mu.Lock()
	heard, held := o.heard, o.turn-now
	r.outs.mu.Unlock()
	if held > 0 {
		return time.Duration(held), nil
	}
	if err := r.usable(ks); err != nil {
		return 0, err
	}
	mostUs := int64(r.cfg.maxWait / time.Microsecond)
	leaseUs := int64(probeLease / time.Microsecond)
	v, err := r.eval(ctx, probeTurnScript, []string{outageKey(ks.hashKey)}, []any{
		r.token(), leaseUs, mostUs, r.marginMs()})
	if err == nil {
		arr, _ := v.([]any)
		var w, code int64
		ok := len(arr) == 2
		if ok {
			w, ok = arr[0].(int64)
		}
		if ok {
			code, ok = arr[1].(int64)
		}
		if !ok || w < 0 || w > 2*mostUs || code < 0 || code > 2 || code == 0 && w != 0 || code == 2 && w > leaseUs {
			err = &ReplyError{Script: "probe", Reply: v, Reason: "want a wait from 0 to twice the cap, and 0, 1 or 2"}
		} else {
			r.up(ks)
			now := r.now()
			r.outs.mu.Lock()
			if o.heard == heard {
				switch code {
				case 0:
					o.down = false
				case 1:
					o.down, o.next, o.turn = true, now+w*1000, 0
				case 2:
					o.down, o.turn = true, now+w*1000
				}
			}
			r.outs.mu.Unlock()
			return time.Duration(w) * time.Microsecond, nil
		}
	}
	if r.failed(ctx, ks, err) {
		return 0, ctx.Err()
	}
	return 0, err
}

// heardOf returns how many changes of o were heard so far.
func (r *Redis) heardOf(o *outageState) uint64 {
	r.outs.mu.Lock()
	defer r.outs.mu.Unlock()
	return o.heard
}

// learnOutage notes what a reply told of o: down, the next probe due in
// w µs. A reply to a call begun before a change was heard is stale: the
// change is newer.
func (r *Redis) learnOutage(o *outageState, heard uint64, down bool, w int64) {
	now := r.now()
	r.outs.mu.Lock()
	defer r.outs.mu.Unlock()
	if o.heard != heard {
		return
	}
	o.down, o.next, o.turn = down, now+w*1000, 0
}

// heardOutage applies a published outage change, "o <hash> <µs to the next
// probe>" or "o <hash> up", and reports whether payload was one.
func (r *Redis) heardOutage(payload string) bool {
	rest, ok := strings.CutPrefix(payload, "o ")
	if !ok {
		return false
	}
	i := strings.LastIndexByte(rest, ' ')
	if i < 0 {
		return true
	}
	hash, what := rest[:i], rest[i+1:]
	r.mu.Lock()
	known := r.byHash[hash] != nil
	r.mu.Unlock()
	if !known {
		return true
	}
	down, w := false, int64(0)
	if what != "up" {
		n, err := strconv.ParseInt(what, 10, 64)
		if err != nil || n < 0 || n > 2*r.capUs() {
			return true // not one a process publishes
		}
		down, w = true, n
	}
	o := r.outageOf(hash)
	now := r.now()
	r.outs.mu.Lock()
	o.down, o.next, o.turn = down, now+w*1000, 0
	o.heard++
	r.outs.mu.Unlock()
	return true
}

// token returns what names this quota as the holder of a probe turn: its
// process ID and a random suffix, so that two quotas given one ID by
// WithProcessID do not take each other's turn.
func (r *Redis) token() string {
	r.outs.once.Do(func() {
		r.outs.tok = r.cfg.id + "/" + strconv.FormatUint(rand.Uint64(), 36)
	})
	return r.outs.tok
}
