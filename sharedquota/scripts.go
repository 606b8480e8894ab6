package sharedquota

import (
	"github.com/redis/go-redis/v9"
)

// The scripts keep time in integer microseconds of Redis's clock (TIME),
// which a Lua number (a double) holds exactly for some 285 years after
// 1970. They write numbers with string.format('%d'), never tostring, whose
// 14 significant digits would round them. Each script touches one key, so
// it runs on any Redis, Cluster included; the keys of one quota share a
// hash tag, so they live in one slot.

// reserveScript spends up to slots reservations of a quota at once, under
// GCRA over all of its limits, and returns the wait of each, in
// microseconds from now, as an array of integers. It spends only those
// whose wait is within ARGV[3] µs: when not even the first is, it spends
// nothing and returns that one's wait alone (longer than ARGV[3]). A
// reservation leaves at
//
//	max(now, pause, max over limits of TAT + units·T − burst·T)
//
// and moves each limit's TAT to max(TAT, departure) + units·T. Reserving a
// lease of n slots is the same as n reservations in a row.
//
// KEYS[1]: the quota's hash: a field "pause" (the instant, in µs, before
// which nothing leaves), a field "exp" (the instant the hash expires, in
// µs), and one field per limit holding its TAT in µs. The hash expires a
// margin after the last of its TATs and its pause: the state it holds is
// that of full buckets by then. The scripts only ever move "exp" later,
// and only when it comes within half a margin of what the state needs, so
// most calls do not touch the TTL; a limit that one request does not use
// keeps its state.
// ARGV[1]: the number of slots; ARGV[2]: the margin of the TTL, in ms;
// ARGV[3]: the longest wait worth spending a slot on, in µs; then 4
// values per limit: field name, interval T (µs), burst (units), units one
// slot spends.
//
// A reservation without limits applies the learned policy, if one is
// current (see learnScript): its fields "li" (T, µs), "lb" (burst) and "lu"
// (the instant it lapses, µs) make one limit of one unit a request, whose
// TAT is the field "lt".
var reserveScript = redis.NewScript(reserveSrc)

const reserveSrc = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local slots = tonumber(ARGV[1])
local margin = tonumber(ARGV[2]) * 1000
local within = tonumber(ARGV[3])
local n = (#ARGV - 3) / 4
local fields = {'pause', 'exp'}
for i = 1, n do fields[i + 2] = ARGV[4 * i] end
if n == 0 then fields = {'pause', 'exp', 'lt', 'li', 'lb', 'lu'} end
local vals = redis.call('HMGET', KEYS[1], unpack(fields))
local pause = tonumber(vals[1]) or 0
local exp = tonumber(vals[2]) or 0
local tat, iv, burst, units = {}, {}, {}, {}
for i = 1, n do
  tat[i] = tonumber(vals[i + 2]) or 0
  iv[i] = tonumber(ARGV[4 * i + 1])
  burst[i] = tonumber(ARGV[4 * i + 2])
  units[i] = tonumber(ARGV[4 * i + 3])
end
if n == 0 and tonumber(vals[4]) and (tonumber(vals[6]) or 0) > now then
  n = 1
  tat[1] = tonumber(vals[3]) or 0
  iv[1] = tonumber(vals[4])
  burst[1] = tonumber(vals[5]) or 1
  units[1] = 1
end
local waits = {}
for s = 1, slots do
  local d = math.max(now, pause)
  for i = 1, n do d = math.max(d, tat[i] + (units[i] - burst[i]) * iv[i]) end
  if d - now > within then
    if s == 1 then return {d - now} end
    break
  end
  for i = 1, n do tat[i] = math.max(tat[i], d) + units[i] * iv[i] end
  waits[s] = d - now
end
if n > 0 then
  local need = pause
  local hs = {}
  for i = 1, n do
    hs[2 * i - 1] = fields[i + 2]
    hs[2 * i] = string.format('%d', tat[i])
    need = math.max(need, tat[i])
  end
  if exp < need + margin / 2 then
    exp = need + margin
    hs[2 * n + 1] = 'exp'
    hs[2 * n + 2] = string.format('%d', exp)
    redis.call('HSET', KEYS[1], unpack(hs))
    redis.call('PEXPIREAT', KEYS[1], string.format('%d', math.ceil(exp / 1000)))
  else
    redis.call('HSET', KEYS[1], unpack(hs))
  end
end
return waits
`

// reserveOneScript is reserveScript for the common case of one limit and
// one slot, with the arithmetic done by the client: it returns the wait as
// an integer, in µs from now, and spends nothing when the wait is longer
// than ARGV[5] µs. Both scripts keep the same fields, so processes that use
// either share one quota.
//
// KEYS[1]: the quota's hash; ARGV[1]: the limit's field; ARGV[2]: burst·T
// less the units the request spends times T, in µs (how far ahead of now
// the TAT may be for the request to leave at once); ARGV[3]: the units
// times T, in µs; ARGV[4]: the margin of the TTL, in µs; ARGV[5]: the
// longest wait worth spending the slot on, in µs.
var reserveOneScript = redis.NewScript(reserveOneSrc)

const reserveOneSrc = `
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local v = redis.call('HMGET', KEYS[1], 'pause', 'exp', ARGV[1])
local pause = tonumber(v[1]) or 0
local tat = tonumber(v[3]) or 0
local d = math.max(now, pause, tat - ARGV[2])
if d - now > tonumber(ARGV[5]) then return d - now end
tat = math.max(tat, d) + ARGV[3]
local exp = tonumber(v[2]) or 0
local need = math.max(tat, pause)
if exp < need + ARGV[4] / 2 then
  exp = need + ARGV[4]
  redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', tat), 'exp', string.format('%d', exp))
  redis.call('PEXPIREAT', KEYS[1], string.format('%d', math.ceil(exp / 1000)))
else
  redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', tat))
end
return d - now
`

// pauseScript makes the quota's pause last at least ARGV[1] µs from now; a
// pause never shortens a longer one. It returns the time left of the
// pause, in µs.
//
// KEYS[1]: the quota's hash; ARGV[1]: the pause in µs; ARGV[2]: the margin
// of the TTL, in ms.
var pauseScript = redis.NewScript(pauseSrc)

const pauseSrc = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local untl = now + tonumber(ARGV[1])
local vals = redis.call('HMGET', KEYS[1], 'pause', 'exp')
local cur = tonumber(vals[1]) or 0
local exp = tonumber(vals[2]) or 0
if untl > cur then
  redis.call('HSET', KEYS[1], 'pause', string.format('%d', untl))
else
  untl = cur
end
local margin = tonumber(ARGV[2]) * 1000
if exp < untl + margin / 2 then
  exp = untl + margin
  redis.call('HSET', KEYS[1], 'exp', string.format('%d', exp))
  redis.call('PEXPIREAT', KEYS[1], string.format('%d', math.ceil(exp / 1000)))
end
return untl - now
`

// pausedScript returns the time left of the quota's pause, in µs; 0 when
// there is none.
//
// KEYS[1]: the quota's hash.
var pausedScript = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local pause = tonumber(redis.call('HGET', KEYS[1], 'pause')) or 0
return math.max(pause - now, 0)
`)

// learnScript records a policy a server stated for the quota: one request
// every ARGV[1] µs, ARGV[2] at once, until ARGV[3] µs from now. The
// reservations without limits of every process apply it (see
// reserveScript). It returns 1.
//
// KEYS[1]: the quota's hash; ARGV[4]: the margin of the TTL, in µs.
var learnScript = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local untl = now + ARGV[3]
local exp = tonumber(redis.call('HGET', KEYS[1], 'exp')) or 0
local lu = string.format('%d', untl)
if exp < untl + ARGV[4] / 2 then
  exp = untl + ARGV[4]
  redis.call('HSET', KEYS[1], 'li', ARGV[1], 'lb', ARGV[2], 'lu', lu, 'exp', string.format('%d', exp))
  redis.call('PEXPIREAT', KEYS[1], string.format('%d', math.ceil(exp / 1000)))
else
  redis.call('HSET', KEYS[1], 'li', ARGV[1], 'lb', ARGV[2], 'lu', lu)
end
return 1
`)

// heartbeatScript announces a process for a quota, or withdraws it, and
// returns how many processes are announced. Each member's score is the
// instant (ms of Redis's clock) its announcement ends.
//
// KEYS[1]: the quota's sorted set of processes; ARGV[1]: the process;
// ARGV[2]: how long the announcement lasts, in ms; ARGV[3]: "1" to
// withdraw.
var heartbeatScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], string.format('%d', now + ttl), ARGV[1])
end
local n = redis.call('ZCARD', KEYS[1])
if n > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return n
`)

// intReply checks that v, a script's reply, is an integer.
func intReply(script string, v any) (int64, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, &ReplyError{Script: script, Reply: v, Reason: "want an integer"}
	}
	return n, nil
}

// waitReply checks that v, reserveOneScript's reply, is a non-negative
// integer.
func waitReply(v any) (int64, error) {
	n, ok := v.(int64)
	if !ok || n < 0 {
		return 0, &ReplyError{Script: "reserve", Reply: v, Reason: "want a non-negative integer"}
	}
	return n, nil
}

// waitsReply checks that v is an array of 1 to want non-negative integers,
// and appends them to dst.
func waitsReply(dst []int64, v any, want int) ([]int64, error) {
	arr, ok := v.([]any)
	if !ok {
		return dst, &ReplyError{Script: "reserve", Reply: v, Reason: "want an array"}
	}
	if len(arr) < 1 || len(arr) > want {
		return dst, &ReplyError{Script: "reserve", Reply: v, Reason: "wrong number of waits"}
	}
	for _, e := range arr {
		n, ok := e.(int64)
		if !ok || n < 0 {
			return dst, &ReplyError{Script: "reserve", Reply: v, Reason: "want non-negative integers"}
		}
		dst = append(dst, n)
	}
	return dst, nil
}
