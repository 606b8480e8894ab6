package sharedquota

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/headway-go/headway"
	"github.com/redis/go-redis/v9"
)

var _ headway.SharedVerdict = (*Redis)(nil)

// maxVerdict is the longest span a verdict on a key's overloads is kept
// (see TellLimit): the root tells one for 10 minutes.
const maxVerdict = time.Hour

// verdictKey returns the name of the key that holds the verdict on the
// overloads of the quota named hash: the same hash tag, so the same slot.
// Not a field of the outage hash, which each outage's end deletes.
func verdictKey(hash string) string { return strings.TrimSuffix(hash, ":q") + ":v" }

// verdictScript records, for ARGV[1] µs (0: takes it back), that the
// overloads of a quota are a limit's refusals, and publishes it: "v <name
// published> <µs>". It returns the span recorded.
//
// KEYS[1]: the verdict key; ARGV[1]: the span, µs; ARGV[2]: the longest,
// µs; ARGV[3]: the channel; ARGV[4]: the name published.
var verdictScript = redis.NewScript(`
local d, most = tonumber(ARGV[1]), tonumber(ARGV[2])
if not d or not most or d < 0 or d > most or d ~= math.floor(d) then
  return redis.error_reply('ERR headway verdict: want a span from 0 to the longest, in whole µs')
end
if d == 0 then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], '1', 'PX', math.ceil(d / 1000))
end
redis.call('PUBLISH', ARGV[3], 'v ' .. ARGV[4] .. ' ' .. string.format('%d', d))
return d
`)

// TellLimit tells every process that the overloads of key (503s or 529s
// naming no delay) were found to be a limit's refusals, for d from now (an
// hour at most); d of 0 or less takes it back. It implements
// headway.SharedVerdict: the verdict is published, and a process hears it
// only so; one that missed it (a Ring, a subscription broken) tries a pace
// on its own.
func (r *Redis) TellLimit(ctx context.Context, key string, d time.Duration) error {
	if r.closed.Load() {
		return ErrClosed
	}
	us := int64(min(max(d, 0), maxVerdict) / time.Microsecond)
	ks := r.state(key)
	r.noteVerdict(ks.hashKey, us)
	if err := r.usable(ks); err != nil {
		return err
	}
	v, err := r.eval(ctx, verdictScript, []string{verdictKey(ks.hashKey)}, []any{
		us, int64(maxVerdict / time.Microsecond), r.channel, ks.hashKey})
	if err == nil {
		if n, ok := v.(int64); !ok || n != us {
			err = &ReplyError{Script: "verdict", Reply: v, Reason: "want the span told"}
		} else {
			r.up(ks)
			return nil
		}
	}
	if r.failed(ctx, ks, err) {
		return ctx.Err()
	}
	return err
}

// HeardLimit returns, from memory, how long from now the overloads of key
// are still taken for a limit's refusals, as this process told or heard
// last; 0 or less: they are not. It implements headway.SharedVerdict.
func (r *Redis) HeardLimit(key string) time.Duration {
	if r.closed.Load() {
		return 0
	}
	r.mu.Lock()
	ks := r.keys[key]
	r.mu.Unlock()
	if ks == nil {
		return 0
	}
	o := r.outageOf(ks.hashKey)
	now := r.now()
	r.outs.mu.Lock()
	defer r.outs.mu.Unlock()
	return time.Duration(o.limit - now)
}

// noteVerdict notes that the overloads of the quota named hash are a
// limit's for us µs from now (0: no longer).
func (r *Redis) noteVerdict(hash string, us int64) {
	o := r.outageOf(hash)
	now := r.now()
	r.outs.mu.Lock()
	o.limit = 0
	if us > 0 {
		o.limit = now + us*1000
	}
	r.outs.mu.Unlock()
}

// heardVerdict applies a published verdict, "v <hash> <µs>", and reports
// whether payload was one.
func (r *Redis) heardVerdict(payload string) bool {
	rest, ok := strings.CutPrefix(payload, "v ")
	if !ok {
		return false
	}
	i := strings.LastIndexByte(rest, ' ')
	if i < 0 {
		return true
	}
	hash := rest[:i]
	us, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil || us < 0 || us > int64(maxVerdict/time.Microsecond) {
		return true // not one a process publishes
	}
	r.mu.Lock()
	known := r.byHash[hash] != nil
	r.mu.Unlock()
	if known {
		r.noteVerdict(hash, us)
	}
	return true
}
