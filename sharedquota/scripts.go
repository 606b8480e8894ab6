package sharedquota

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// The scripts keep time in integer microseconds of Redis's clock (TIME),
// which a Lua number (a double) holds exactly for some 285 years after
// 1970. They write numbers with string.format('%d'), never tostring, whose
// 14 significant digits would round them. Each script touches one key, so
// it runs on any Redis, Cluster included; the keys of one quota share a
// hash tag, so they live in one slot.

// prelude opens every script but the heartbeat: the time, in µs of
// Redis's clock, and the checks that every value read from Redis passes
// before it is used. Another program, a bug or an attacker with write
// access may have left anything in a field: text, NaN, inf, a negative
// number, one so large it overflows on the way back. A value is valid when
// it is a finite, non-negative number no further ahead than any process
// writes (the cap on waits, ARGV "cap", plus what the value's own limit
// adds), with a minute of slack for the clocks of a failover. What is not
// valid is repaired when the script writes next: an instant reads as
// absent, a TAT as an empty bucket (the conservative reading), and a pause
// a little beyond the cap as the cap.
//
// Redis's clock may go back under the state it holds: a failover to a
// replica whose clock is behind the old primary's, an NTP step on its
// host. Every instant written before then is then ahead by the jump, and
// would hold the quota that much longer: a TAT booked as far as it may be
// and a pause as long as the cap would still pass the checks above. So
// every script that writes a quota's hash writes its clock too, in the
// field "hw" (the high-water mark), and every script that reads one
// starts with rebased: when Redis's clock reads more than a millisecond
// before hw, it moves every instant of the hash back by the difference,
// as if the state had been written now, and the script reads the hash
// again. The state then means what it meant when it was written: a jump
// back costs at most what the state held then (a bucket's time, the
// schedule booked ahead, the pause left), never the jump. A jump forward
// cannot be told from time passing: the state looks older, as it would
// after an idle spell (see the package documentation).
const prelude = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local slack = 60000000
local function valid(v, hi)
  local x = tonumber(v)
  if x == nil or x ~= x or x < 0 or x > hi + slack then return nil end
  return x
end
-- pauseOf reads the pause stored as v, capped, and whether the stored
-- value needs a repair (bad, or beyond the cap); with a floor (µs from
-- now, 0 for none), the pause lasts that long at least, which is a change
-- to store too.
local function pauseOf(v, cap, floor)
  local p, fix = valid(v, now + cap), false
  if p then
    p, fix = math.min(p, now + cap), p > now + cap
  else
    p, fix = 0, v ~= false and v ~= nil
  end
  if floor and floor > 0 and now + math.min(floor, cap) > p then
    p, fix = now + math.min(floor, cap), true
  end
  return p, fix
end
-- save writes the fields hs (name, value, ...; none is fine) to KEYS[1],
-- and keeps the hash until need + margin at least: its expiry, stored in
-- its field exp (read as old), moves out to there when fix, when old is
-- missing or bad, or when it comes within half a margin of need.
local function save(hs, old, need, margin, cap, fix)
  local exp = valid(old, now + 2 * cap + 604800000000)
  if fix or exp == nil or exp < need + margin / 2 then
    exp = math.max(exp or 0, need + margin)
    hs[#hs + 1] = 'exp'
    hs[#hs + 1] = string.format('%d', exp)
    redis.call('HSET', KEYS[1], unpack(hs))
    hs[#hs + 1] = 'hw'
    hs[#hs + 1] = string.format('%d', now)
    redis.call('HSET', KEYS[1], unpack(hs))
    redis.call('PEXPIREAT', KEYS[1], string.format('%d', math.ceil(exp / 1000)))
  elseif #hs > 0 then
    hs[#hs + 1] = 'hw'
    hs[#hs + 1] = string.format('%d', now)
    redis.call('HSET', KEYS[1], unpack(hs))
  end
end
-- behind returns how far Redis's clock is behind the high-water mark v
-- (the field hw), in µs: 0 when it is not, or v is not valid (a week
-- ahead at most: a jump further back is not believed, and the checks
-- above repair what it left).
local function behind(v)
  local hw = valid(v, now + 604800000000)
  if not hw or hw <= now then return 0 end
  return hw - now
end
-- rebased moves every instant of the quota's hash back by how far
-- Redis's clock went back since the hash was last written (hw, read as v)
-- and reports whether it did, so that the caller reads the hash again.
-- The instants are the fields pause, exp, lt, lu, at, ac, a1, ph, am and ao, and
-- the TATs of the limits, whose names start with two numbers; a value
-- that is not a number of µs since 1970 is left to the checks. A jump of
-- a millisecond or less is left alone.
local function rebased(v)
  local back = behind(v)
  if back <= 1000 then return false end
  local instants = {pause = true, exp = true, lt = true, lu = true, at = true, ac = true, a1 = true, ph = true, am = true, ao = true}
  local all = redis.call('HGETALL', KEYS[1])
  local hs, exp = {'hw', string.format('%d', now)}, nil
  for i = 1, #all, 2 do
    local f, x = all[i], tonumber(all[i + 1])
    if x and x >= back and x < 9007199254740992 and (instants[f] or string.find(f, '^%d+:%d+')) then
      x = x - back
      hs[#hs + 1] = f
      hs[#hs + 1] = string.format('%d', x)
      if f == 'exp' then exp = x end
    end
  end
  redis.call('HSET', KEYS[1], unpack(hs))
  if exp then redis.call('PEXPIREAT', KEYS[1], string.format('%d', math.ceil(exp / 1000))) end
  return true
end
`

// aimdLua follows the prelude of the scripts that read the fleet's pace
// after bare throttles (see cutScript): the curve of the root's AIMD
// (adapt.go), in Redis's clock, so that every process paces by one rate
// and regrows along one curve. Rates are in thousandths of a request per
// second. The constants are aimdBeta, aimdK, aimdFloor and aimdLife (Go),
// which TestAIMDCurveAgrees holds to these.
const aimdLua = `
local beta, aimdK, aimdFloor, aimdLife = 0.9, 12000000, 500, 600000000
local blockLeast, penClimb, blockShorter = 5000000, 4, 500000
local probeHold, probePoll = 1000000, 15000
local aimdMost = 1000000000000
-- aimdRate returns the pace at now of a cut at instant cut (µs) from the
-- rate wmax: doubling every second in slow start, else on the cubic curve
-- that climbs back to wmax in k µs (nil: aimdK), never below the floor.
local function aimdRate(wmax, cut, slow, k)
  local t = math.max(now - cut, 0) / 1000000
  local r
  if slow then
    r = wmax * beta * 2 ^ math.min(t, 60)
  else
    k = (k or aimdK) / 1000000
    r = wmax * (1 - beta) / (k * k * k) * (t - k) ^ 3 + wmax
    r = math.max(r, wmax * beta)
  end
  return math.min(math.max(r, aimdFloor), aimdMost)
end
-- aimdInterval is the pace as an interval, µs, rounded up.
local function aimdInterval(wmax, cut, slow, k)
  return math.ceil(1000000000 / aimdRate(wmax, cut, slow, k))
end
-- aimdClimb returns where the climb from the cut at ac starts and how long
-- it takes, µs, from the fields ao and ak (read as vo and vk; see
-- cutScript): the cut's instant unless ao is later (nothing was sent
-- before it: a pause, a block's backoff), and aimdK unless ak is longer
-- (a block's cost, penClimb times over).
local function aimdClimb(ac, vo, vk, cap)
  local o, k = valid(vo, now + cap), valid(vk, penClimb * (cap + 2000000))
  if not o or o < ac then o = ac end
  if not k or k < aimdK then k = aimdK end
  return o, k
end
`

// reserveScript spends up to slots reservations of a quota at once, under
// GCRA over all of its limits, and returns the wait of each, in
// microseconds from now, as an array of integers, then the time left of
// the pause (so that a process knows of a pause as fresh as its last
// reservation, without asking). It spends only those whose wait is within
// ARGV[3] µs: when not even the first is, it spends nothing and returns
// that one's wait alone (longer than ARGV[3]), then the pause. A
// reservation leaves at
//
//	max(now, pause, max over limits of TAT + units·T − burst·T)
//
// and moves each limit's TAT to max(TAT, departure) + units·T. Reserving a
// lease of n slots is the same as n reservations in a row.
//
// KEYS[1]: the quota's hash: a field "pause" (the instant, in µs, before
// which nothing leaves), a field "exp" (the instant the hash expires, in
// µs), a field "hw" (Redis's clock when a script last wrote the hash, µs:
// see prelude), and one field per limit holding its TAT in µs. The hash
// expires a
// margin after the last of its TATs and its pause: the state it holds is
// that of full buckets by then. The scripts only ever move "exp" later,
// and only when it comes within half a margin of what the state needs, so
// most calls do not touch the TTL; a limit that one request does not use
// keeps its state.
// ARGV[1]: the number of slots; ARGV[2]: the margin of the TTL, in ms;
// ARGV[3]: the longest wait worth spending a slot on, in µs; ARGV[4]: the
// cap on waits, in µs; ARGV[5]: the least pause, in µs from now (0: none);
// then 5 values per limit: field name, interval T (µs), burst (units),
// units one slot spends, and the least TAT, in µs from now (0: none).
// The least values are what a process paced and paused on its own while
// Redis was away: it records them with its first reservation after.
//
// A reservation without limits applies the learned policy, if one is
// current (see learnScript): its fields "li" (T, µs), "lb" (burst) and "lu"
// (the instant it lapses, µs) make one limit of one unit a request, whose
// TAT is the field "lt". It applies the fleet's pace after bare throttles
// too, if one is current (see cutScript): a limit of one request at the
// pace of the curve at now (climbing from "ao" over "ak", if set), burst
// 1, whose TAT is the field "at". It counts itself in the field "an" (the
// count of such reservations; "a1" the instant counting began; "ax" the
// count of the last that left at once, not after a wait for a pause or a
// pace) and returns four more integers: "an" after it,
// the slowest interval it applied (µs; 0: none), which the process keeps
// for its fallback, "acn", the count at the last cut (see cutScript), and
// 1 if it was held for the fleet's probe, else 0.
//
// The fleet's probe: a reservation without limits that finds nothing
// learned and nothing counted is the fleet's first request. It goes, and
// until its process (ARGV[6], given only without limits) reserves again
// (its answer came), a second at most (field "ph"; "po" is the process),
// the reservations of the other processes are held: each spends nothing
// and returns a wait of probePoll at most, after which the process asks
// again (see PausedFor). A process holds its own requests until its probe
// is answered already; the fleet then sends one probe, not one each.
var reserveScript = redis.NewScript(reserveSrc)

const reserveSrc = prelude + aimdLua + `
local slots = tonumber(ARGV[1])
local margin = tonumber(ARGV[2]) * 1000
local within = tonumber(ARGV[3])
local cap = tonumber(ARGV[4])
local n = math.floor((#ARGV - 5) / 5)
local learned = n == 0
local fields = {'pause', 'exp'}
for i = 1, n do fields[i + 2] = ARGV[5 * i + 1] end
if learned then fields = {'pause', 'exp', 'lt', 'li', 'lb', 'lu', 'at', 'ar', 'ac', 'as', 'an', 'a1', 'acn', 'po', 'ph', 'ao', 'ak'} end
fields[#fields + 1] = 'hw'
local vals = redis.call('HMGET', KEYS[1], unpack(fields))
if rebased(vals[#fields]) then vals = redis.call('HMGET', KEYS[1], unpack(fields)) end
local pause, fix = pauseOf(vals[1], cap, tonumber(ARGV[5]))
local tat, iv, burst, units, floor, src = {}, {}, {}, {}, {}, {}
for i = 1, n do
  iv[i] = tonumber(ARGV[5 * i + 2])
  burst[i] = tonumber(ARGV[5 * i + 3])
  units[i] = tonumber(ARGV[5 * i + 4])
  floor[i] = tonumber(ARGV[5 * i + 5])
  src[i] = i + 2
end
local an, a1, pace, acn = 0, nil, 0, 0
if learned then
  local li = valid(vals[4], 86400000000)
  local lb = valid(vals[5], 1000000000)
  local lu = valid(vals[6], now + 432000000000)
  if li and li >= 1 and lb and lb >= 1 and lu and lu > now then
    n = n + 1
    src[n], iv[n], burst[n], units[n], floor[n] = 3, li, math.floor(lb), 1, 0
  end
  local ar = valid(vals[8], aimdMost)
  local ac = valid(vals[9], now)
  if ar and ar >= 1 and ac and now - ac < aimdLife then
    n = n + 1
    local o, k = aimdClimb(ac, vals[16], vals[17], cap)
    src[n], iv[n], burst[n], units[n], floor[n] = 7, aimdInterval(ar, o, vals[10] == '1', k), 1, 1, 0
  end
  for i = 1, n do pace = math.max(pace, iv[i]) end
  an = math.floor(valid(vals[11], 1e15) or 0)
  a1 = valid(vals[12], now)
  acn = math.min(math.floor(valid(vals[13], 1e15) or 0), an)
end
-- The fleet's probe: with nothing learned, the fleet's first request goes
-- alone, and the others wait for its answer (its process reserving again),
-- a second at most, asking again every probePoll.
local probe, held, ph = nil, false, nil
if learned and n == 0 then
  ph = valid(vals[15], now + probeHold)
  if ph and ph > now + probeHold then ph = nil end
  if not a1 then
    probe = now + probeHold
  elseif ph and ph > now then
    if vals[14] == ARGV[6] then
      probe = 0
    else
      held = true
    end
  end
end
for i = 1, n do
  local full = burst[i] * iv[i]
  local v = vals[src[i]]
  tat[i] = valid(v, now + cap + full)
  if not tat[i] then
    fix = fix or v ~= false
    tat[i] = v and now + full or 0
  end
  if floor[i] > 0 and now + math.min(floor[i], cap + full) > tat[i] then
    tat[i] = now + math.min(floor[i], cap + full)
    fix = true
  end
end
-- last is how far ahead of now the schedule is booked: until when its
-- buckets are empty (TAT - burst·T), the next departure one interval on.
local function last()
  local l = now
  for i = 1, n do l = math.max(l, tat[i] - burst[i] * iv[i]) end
  return l - now
end
-- tail ends the reply: the pause, the booking, and for a reservation
-- without limits the count of such reservations and the pace learned.
local function tail(waits)
  waits[#waits + 1] = math.max(pause - now, 0)
  waits[#waits + 1] = last()
  if learned then
    waits[#waits + 1] = an
    waits[#waits + 1] = pace
    waits[#waits + 1] = acn
    waits[#waits + 1] = held and 1 or 0
  end
  return waits
end
if held then
  return tail({math.min(ph - now, probePoll, math.max(within, 0))})
end
local waits, spent = {}, 0
for s = 1, slots do
  local d = math.max(now, pause)
  for i = 1, n do d = math.max(d, tat[i] + (units[i] - burst[i]) * iv[i]) end
  if d - now > within then
    if s == 1 then waits[1] = d - now end
    break
  end
  for i = 1, n do tat[i] = math.max(tat[i], d) + units[i] * iv[i] end
  waits[s] = d - now
  spent = s
end
if spent == 0 and not fix then return tail(waits) end
local need = pause
local hs = {}
for i = 1, n do
  hs[#hs + 1] = fields[src[i]]
  hs[#hs + 1] = string.format('%d', tat[i])
  need = math.max(need, tat[i])
end
if learned and spent > 0 then
  -- Reservations without limits are counted, whether or not a pace is
  -- learned yet: the fleet's first throttle measures what it sent.
  -- ax: the count of the last of them that left at once (see
  -- cutScript), which a wait for a pause or a pace does not raise.
  local left = 0
  for s = 1, spent do
    if waits[s] == 0 then left = s end
  end
  if left > 0 then
    hs[#hs + 1] = 'ax'
    hs[#hs + 1] = string.format('%d', an + left)
  end
  an = an + spent
  hs[#hs + 1] = 'an'
  hs[#hs + 1] = string.format('%d', an)
  if not a1 then
    hs[#hs + 1] = 'a1'
    hs[#hs + 1] = string.format('%d', now)
  end
  if probe then
    hs[#hs + 1] = 'po'
    hs[#hs + 1] = ARGV[6]
    hs[#hs + 1] = 'ph'
    hs[#hs + 1] = string.format('%d', probe)
  end
  need = math.max(need, now, probe or 0)
end
if fix then
  hs[#hs + 1] = 'pause'
  hs[#hs + 1] = string.format('%d', pause)
end
if #hs > 0 then
  save(hs, vals[2], need, margin, cap, fix)
end
return tail(waits)
`

// reserveOneScript is reserveScript for the common case of one limit and
// one slot, with the arithmetic done by the client: it returns the wait,
// in µs from now, and the time left of the pause, and spends nothing when
// the wait is longer than ARGV[5] µs. Both scripts keep the same fields, and check them the
// same way, so processes that use either share one quota.
//
// KEYS[1]: the quota's hash; ARGV[1]: the limit's field; ARGV[2]: burst·T
// less the units the request spends times T, in µs (how far ahead of now
// the TAT may be for the request to leave at once); ARGV[3]: the units
// times T, in µs; ARGV[4]: the margin of the TTL, in µs; ARGV[5]: the
// longest wait worth spending the slot on, in µs; ARGV[6]: the cap on
// waits, in µs; ARGV[7] and ARGV[8]: the least TAT and the least pause, in
// µs from now (0: none), as in reserveScript.
var reserveOneScript = redis.NewScript(reserveOneSrc)

const reserveOneSrc = prelude + `
local room, step, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[6])
local v = redis.call('HMGET', KEYS[1], 'pause', 'exp', ARGV[1], 'hw')
if rebased(v[4]) then v = redis.call('HMGET', KEYS[1], 'pause', 'exp', ARGV[1], 'hw') end
local pause, fix = pauseOf(v[1], cap, tonumber(ARGV[8]))
local tat = valid(v[3], now + cap + room + step)
if not tat then
  fix = fix or v[3] ~= false
  tat = v[3] and now + room + step or 0
end
local floor = tonumber(ARGV[7])
if floor > 0 and now + math.min(floor, cap + room + step) > tat then
  tat = now + math.min(floor, cap + room + step)
  fix = true
end
local d = math.max(now, pause, tat - room)
local spend = d - now <= tonumber(ARGV[5])
if not spend and not fix then return {d - now, math.max(pause - now, 0), math.max(tat - room - step - now, 0)} end
if spend then tat = math.max(tat, d) + step end
local hs = {ARGV[1], string.format('%d', tat)}
if fix then
  hs[3] = 'pause'
  hs[4] = string.format('%d', pause)
end
save(hs, v[2], math.max(tat, pause), tonumber(ARGV[4]), cap, fix)
return {d - now, math.max(pause - now, 0), math.max(tat - room - step - now, 0)}
`

// pauseScript makes the quota's pause last at least ARGV[1] µs from now; a
// pause never shortens a longer one. It returns the time left of the
// pause, in µs.
//
// A pause that lengthens the one held is published on ARGV[4], as the
// hash's name and the pause's time left in µs, so that every process knows
// of it at once (see subscribe).
//
// KEYS[1]: the quota's hash; ARGV[1]: the pause in µs; ARGV[2]: the margin
// of the TTL, in ms; ARGV[3]: the cap on waits, in µs (the pause is no
// longer); ARGV[4]: the channel.
var pauseScript = redis.NewScript(pauseSrc)

const pauseSrc = prelude + `
local cap = tonumber(ARGV[3])
local untl = now + math.min(tonumber(ARGV[1]), cap)
local vals = redis.call('HMGET', KEYS[1], 'pause', 'exp', 'hw')
if rebased(vals[3]) then vals = redis.call('HMGET', KEYS[1], 'pause', 'exp', 'hw') end
local cur, fix = pauseOf(vals[1], cap)
local hs = {}
if untl > cur or fix then
  untl = math.max(untl, cur)
  hs = {'pause', string.format('%d', untl)}
  redis.call('PUBLISH', ARGV[4], KEYS[1] .. ' ' .. string.format('%d', untl - now))
else
  untl = cur
end
save(hs, vals[2], untl, tonumber(ARGV[2]) * 1000, cap, fix)
return untl - now
`

// pausedScript returns the time left of the quota's pause, in µs; 0 when
// there is none. It reads the pause as the other scripts do, and leaves
// its repair to them.
//
// KEYS[1]: the quota's hash; ARGV[1]: the cap on waits, in µs.
var pausedScript = redis.NewScript(prelude + `
local v = redis.call('HMGET', KEYS[1], 'pause', 'hw')
local back = behind(v[2])
local p = valid(v[1], now + back + tonumber(ARGV[1]))
if p and back > 0 then v[1] = p - back end
local pause = pauseOf(v[1], tonumber(ARGV[1]))
return math.max(pause - now, 0)
`)

// learnScript records a policy a server stated for the quota: one request
// every ARGV[1] µs, ARGV[2] at once, until ARGV[3] µs from now. The
// reservations without limits of every process apply it (see
// reserveScript). While the same policy holds, its burst is the largest
// any process shared: each shares what it has seen of the server's
// capacity, and no process has seen more than there is.
//
// A policy that starts (none held) starts from what the server said was
// left, ARGV[6] (-1: not said): the requests that went before it was known
// were spent, and each of ARGV[7]-1 other processes may have one in
// flight; none when the answer is to the fleet's probe (see reserveScript)
// from the process that sent it (ARGV[8]), since the others' were held.
// So the policy's TAT starts no earlier than to leave ARGV[6]-ARGV[7]
// requests at once (one kept in reserve). It returns 1.
//
// KEYS[1]: the quota's hash; ARGV[4]: the margin of the TTL, in µs;
// ARGV[5]: the cap on waits, in µs.
var learnScript = redis.NewScript(prelude + aimdLua + `
local untl = now + ARGV[3]
local cap = tonumber(ARGV[5])
local li = tonumber(ARGV[1])
local lb = tonumber(ARGV[2])
local v = redis.call('HMGET', KEYS[1], 'exp', 'li', 'lb', 'lu', 'lt', 'po', 'ph', 'hw')
if rebased(v[8]) then v = redis.call('HMGET', KEYS[1], 'exp', 'li', 'lb', 'lu', 'lt', 'po', 'ph', 'hw') end
local held = valid(v[2], 86400000000) == li and (valid(v[4], now + 432000000000) or 0) > now
if held then
  lb = math.max(lb, math.floor(valid(v[3], 1000000000) or 0))
end
local hs = {'li', ARGV[1], 'lb', string.format('%d', lb), 'lu', string.format('%d', untl)}
local left, procs = tonumber(ARGV[6]), tonumber(ARGV[7])
local ph = valid(v[7], now + probeHold)
if v[6] == ARGV[8] and ph and ph > now and ph <= now + probeHold then
  procs = 1 -- the answer to the fleet's probe: the others held theirs
end
if not held and left >= 0 then
  local floor = now + (lb - math.min(math.max(left - procs, 0), lb)) * li
  local lt = valid(v[5], now + cap + lb * li)
  if lt == nil or lt < floor then
    hs[#hs + 1] = 'lt'
    hs[#hs + 1] = string.format('%d', floor)
  end
end
save(hs, v[1], untl, tonumber(ARGV[4]), cap, false)
return 1
`)

// cutScript applies a bare throttle (a 429 that states no quota) of a
// request reserved without limits to the fleet's pace: a multiplicative
// cut, then the climb back that every reservation reads (see aimdLua),
// the rule of the root's AIMD (adapt.go) with the fleet's counts.
//
// Only a request reserved after the last cut can say that the cut pace is
// still too high: ARGV[1] is the highest count ("an") of a reservation the
// throttled request may have been (the latest of its process's that had
// left), and a throttle whose bound is not above the count at the last cut
// ("acn") changes nothing: it was booked, and sent, at the pace before it.
//
// The first cut (no pace current) measures the reservations counted since
// counting began over the time since, a second at least: mostly a burst,
// so the pace after it doubles every second (slow start) until the next
// cut. A later cut measures what the fleet sent since the last one, less
// the throttled request, over the time since: the server's bucket was
// empty at both throttles, so that is what it let through, its rate (never
// more than the pace at now). The pace becomes beta times what was
// measured (1 - 1/sent when that is more, out of slow start: a measure
// over many requests is cut less), and the next request waits one
// interval at it.
//
// A throttle after one reservation a process at most since the cut, or
// since the last such throttle, measures nothing either: it left into the
// bucket the throttle before emptied, or into a block (a server that
// blocks a key after a violation answers each probe into the block so,
// and each process sends one try at a time into it). It changes no pace;
// the next request waits a backoff that doubles with each such throttle
// in a row ("ab"), from the wait the throttle named if longer, and the
// measure starts again from it ("am", "amn"); the requests booked before
// it reserve again after the backoff.
//
// A server that blocks a key for longer than its window after a
// violation is met as a process meets it on its own (the root's
// aimd.blocked and aimd.namedBlock): throttles in a row that measured
// nothing from a cut to the end of their backoff, blockLeast or more, are
// a block, and so is a first throttle that names a wait of blockLeast or
// more, in whole seconds, far longer than the first burst took. Nothing
// is sent during a block's backoff, or during a wait of blockLeast or
// more that a throttle named: the climb starts at its end ("ao"), not
// at the cut, and the next cut measures from there, with the burst the
// server held at the end of a block taken off. After a block the climb
// back takes penClimb times what the block cost, at least ("ak"); after
// the first burst's, the fleet resumes at what that burst let through a
// second (no more than came before any of it was throttled, less each
// request of it throttled), not in slow start. When the first throttle
// sent after such a named wait names one shorter by blockShorter or
// more, the server is a window after all (the root's
// aimd.windowAfterAll): the block is forgotten, and the fleet pauses as
// long as the first wait.
//
// KEYS[1]: the quota's hash (fields "ar": the rate at the cut, "ac": the
// cut's instant, µs, "as": "1" in slow start, "acn": "an" at the cut,
// "at": the pace's TAT, "am" and "amn": the instant and count the
// measure starts from, if later than the cut, "ab": the throttles in a
// row that measured nothing, "aw": the last one's backoff, µs, "ao": the
// climb's start, µs, if later than the cut, "ak": the climb's time, µs,
// if longer than aimdK, "ap": "1" while the cut is the first, "au": the
// requests of the first burst, less each of them throttled since, "ay":
// the fewest counted before one of them throttled, "ad": the burst's
// span, µs, a second at least, "ae": the count before it, "ag": "1" when
// "ao" is a block's end or a named wait's, "ax": the count of the last
// reservation that left at once, see reserveScript, "aq": the wait the
// first throttle named, µs, while it is taken for a block's and no
// throttle sent after it has told whether it was a window's, "pause": as
// in reserveScript); ARGV[2]:
// the margin of the TTL, in ms; ARGV[3]: the cap on waits, µs; ARGV[4]:
// the channel, on which a cut is published as "c <hash name> <acn>";
// ARGV[5]: the processes announced; ARGV[6]: the wait the throttle named,
// µs (0: none). It returns the pace after it, in thousandths of a request
// per second, 1 if it cut, 0 if the throttle was stale or measured
// nothing, and the count the requests booked up to reserve again: "acn",
// or for a throttle that measured nothing, "an" (published as a cut is).
// The state lasts aimdLife after the cut.
var cutScript = redis.NewScript(prelude + aimdLua + `
local bound = tonumber(ARGV[1])
local margin = tonumber(ARGV[2]) * 1000
local cap = tonumber(ARGV[3])
local procs = math.max(math.floor(tonumber(ARGV[5]) or 1), 1)
local named = math.min(math.max(tonumber(ARGV[6]) or 0, 0), cap)
local fields = {'exp', 'at', 'ar', 'ac', 'as', 'an', 'a1', 'acn', 'hw', 'am', 'amn', 'ab', 'aw', 'ao', 'ak', 'ap', 'ay', 'au', 'ag', 'ad', 'ae', 'ax', 'aq', 'pause'}
local v = redis.call('HMGET', KEYS[1], unpack(fields))
if rebased(v[9]) then v = redis.call('HMGET', KEYS[1], unpack(fields)) end
local ar = valid(v[3], aimdMost)
local ac = valid(v[4], now)
local slow = v[5] == '1'
local an = math.floor(valid(v[6], 1e15) or 0)
local a1 = valid(v[7], now) or now
local acn = math.min(math.floor(valid(v[8], 1e15) or 0), an)
local at = valid(v[2], now + cap + 2000000) or 0
local active = ar and ar >= 1 and ac and now - ac < aimdLife
-- first: the cut is the first (its measure is of the first burst): au,
-- the requests of that burst, less each throttled since; ay, the fewest
-- counted before one of them throttled (from ae, the count before the
-- burst): the burst let through no more than either, over ad µs.
local first = active and v[16] == '1'
local au = math.floor(valid(v[18], 1e15) or 0)
local ay = math.floor(valid(v[17], 1e15) or 0)
local ad = math.max(valid(v[20], aimdLife) or 1000000, 1000000)
local ae = math.floor(valid(v[21], 1e15) or 0)
-- aq: the wait the first throttle named, µs, when the first cut took it
-- for a block's; 0 once a throttle sent after it told (see below).
local aq = valid(v[23], cap) or 0
local function burst() return math.max(math.min(au, ay), 1) end
local function burstRate() return math.max(burst() * 1000000000 / ad, aimdFloor) end
local o, k
if active then o, k = aimdClimb(ac, v[14], v[15], cap) end
local function d(x) return string.format('%d', math.floor(x)) end
if active and bound <= acn then
  if first then
    -- Another of the first burst, throttled: what got through of it a
    -- second is one less. Slow start's pace is left alone (it measures
    -- a burst the server may well sustain); a block's resumes at it.
    au, ay = math.max(au - 1, 1), math.min(ay, math.max(math.min(bound, an) - ae, 1))
    if slow then
      redis.call('HSET', KEYS[1], 'au', d(au), 'ay', d(ay), 'hw', d(now))
    else
      ar = burstRate()
      redis.call('HSET', KEYS[1], 'ar', d(ar), 'au', d(au), 'ay', d(ay), 'hw', d(now))
    end
  end
  return {math.floor(aimdRate(ar, o, slow, k)), 0, acn}
end
local measured, sent, keep = 0, 0, beta
local hs = {'ap', '0', 'ag', '0'}
if not active then
  -- What the first burst sent: the reservations that left at once ("ax",
  -- see reserveScript; "an" from a process that does not count it), not
  -- those booked after the pause a throttle with its wait set meanwhile
  -- (the root shares that pause first): counted in the burst, those
  -- resumed the fleet after the block above the rate it had measured,
  -- and met a second block.
  local gone = math.min(math.floor(valid(v[22], 1e15) or an), an)
  if gone <= acn then gone = an end
  ad, ae = math.min(math.max(now - a1, 1000000), aimdLife), acn
  measured = (gone - acn) * 1000000000 / ad
  au, ay = math.max(gone - acn - 1, 1), math.max(math.min(bound, gone) - acn - 1, 1) -- this one was throttled
  slow = true
  o, k, aq = now, aimdK, 0
  if named >= blockLeast and named % 1000000 == 0 and named > 4 * (now - a1) then
    -- A first throttle that names a wait, in whole seconds, of
    -- blockLeast or more, far longer than the first burst took: a
    -- window's or a block's. Slow start doubled its pace through such a
    -- wait, and the fleet sent what it had booked at once when it ended
    -- (9 requests into a block the same instant, and a block a cycle).
    -- The fleet resumes as a process does (the root's aimd.namedBlock):
    -- at what the burst let through a second (less each request of it
    -- throttled after), climbing back over penClimb times the wait; a
    -- window's quota still goes through in its window.
    slow = false
    k = math.max(aimdK, penClimb * named)
    measured = burstRate()
    aq = named
  end
  hs = {'ap', '1', 'ag', '0', 'au', d(au), 'ay', d(ay), 'ad', d(ad), 'ae', d(ae), 'ak', d(k), 'aq', d(aq)}
else
  if aq > 0 then
    -- The first throttle sent after the wait the first cut took for a
    -- block's ("aq", see above), naming a wait: if it names one shorter
    -- by blockShorter or more, the server is a window (or a log) after
    -- all, as a process finds (the root's aimd.windowAfterAll): a
    -- window's wait ends at its boundary, and the cycle, spent over a
    -- second and more, leaves less of it than the first burst's did; a
    -- block's is named anew from the violation, as long as before. The
    -- block is forgotten: the climb back takes aimdK again, not penClimb
    -- times the wait; and the fleet waits as long as the first wait (a
    -- log gives back what the cycle spent over its span only that long
    -- after it), its pause lengthened and published as pauseScript
    -- does. Only the first such throttle tells (the root's too).
    local hq = {'aq', '0'}
    if named > 0 and named < aq - blockShorter then
      k, named = aimdK, math.min(aq, cap)
      hq[#hq + 1] = 'ak'
      hq[#hq + 1] = d(k)
      if now + named > pauseOf(v[24], cap) then
        hq[#hq + 1] = 'pause'
        hq[#hq + 1] = d(now + named)
        redis.call('PUBLISH', ARGV[4], KEYS[1] .. ' ' .. d(named))
      end
    end
    save(hq, v[1], now + named, margin, cap, false)
  end
  -- The reservations are spent in the order they leave: those counted
  -- from acn + 1 to the throttled one's bound left since the cut, the
  -- last of them throttled.
  local cur = aimdRate(ar, o, slow, k)
  -- The measure runs from the cut, or from the last throttle that
  -- measured nothing (see below), or from the end of a block or of a
  -- wait of blockLeast or more ("ag"), if later: nothing was sent before
  -- it, and a cycle measured over a block of 10 s read the rate at half
  -- what it was, and kept the fleet at it. (A shorter backoff is part of
  -- the cycle: the server's bucket refilled during it.)
  local from, fromn = ac, acn
  local am, amn = valid(v[10], now), math.floor(valid(v[11], 1e15) or -1)
  if am and am > ac and amn >= acn and amn <= an then
    from, fromn = am, amn
  end
  local afterBlock = false
  if v[19] == '1' and o > from and o < now then
    from, afterBlock = o, true
  end
  local since = math.min(bound, an) - fromn
  if since <= 0 then
    -- Out with the last throttle that measured nothing, and throttled
    -- with it: the backoff doubles once a round, not once a request.
    return {math.floor(cur), 0, acn}
  end
  if since <= procs then
    -- One request a process at most (each sends one try at a time into
    -- what it takes for a block): it measures no rate. Cut by each round
    -- of tries into a block, the pace fell to the floor, a try each 2 s,
    -- and kept a block of 3 s going for good; cut by each single probe,
    -- it stayed at the floor long after the block (3 processes sent 28
    -- of 300 requests in a minute, one alone 297). The pace is kept,
    -- slow start ends (doubling on through a block, it was thousands a
    -- second when the block ended), and the next request waits a backoff
    -- that doubles with each such throttle in a row, from a quarter of a
    -- second up to the cap: a block that each request restarts ends only
    -- when the fleet keeps away for longer than it lasts. The backoff is
    -- the wait the throttle named (ARGV[6]) if longer, and doubles from
    -- the last one ("aw"), as a process's strikes do: a server that names
    -- its window's wait through a block (3 s restarted by each request,
    -- windows of 2 s) was met by a try each 2 s, and the block went on
    -- for 15 s instead of 5. The measure starts again from here, and the
    -- climb from the backoff's end ("ao"), as a process's does after its
    -- strikes.
    local ab = math.min(math.floor(valid(v[12], 64) or 0), 40)
    local back = 250000 * 2 ^ ab
    local aw = valid(v[13], cap)
    if ab > 0 and aw and aw > 0 then back = math.max(back, 2 * aw) end
    back = math.min(math.max(back, named), cap)
    at = math.max(at, now + back)
    o = math.max(o, at)
    hs = {'am', d(now), 'amn', d(an), 'ab', d(ab + 1), 'aw', d(back), 'at', d(at), 'as', '0', 'ao', d(o), 'hw', d(now)}
    if at - ac >= blockLeast then
      -- Throttles in a row from the cut to the backoff's end over
      -- blockLeast: a block, as a process takes it (the root's
      -- aimd.blocked). The climb back to the rate of the cut takes
      -- penClimb times what the block cost, at least (a climb of aimdK
      -- past the rate met the next block), and the next cut takes the
      -- burst the server held when the block ended off its measure
      -- ("ag"). After the first burst's block, the pace resumes at what
      -- that burst let through a second, less the requests of it
      -- throttled.
      k = math.max(k, math.min(penClimb * (at - ac), penClimb * (cap + 2000000)))
      hs[#hs + 1] = 'ak'
      hs[#hs + 1] = d(k)
      hs[#hs + 1] = 'ag'
      hs[#hs + 1] = '1'
      if first then
        ar = math.min(ar, burstRate())
        hs[#hs + 1] = 'ar'
        hs[#hs + 1] = d(ar)
      end
    end
    redis.call('HSET', KEYS[1], unpack(hs))
    -- The requests booked before it reserve again, after the backoff, as
    -- after a cut: left at their slots (a second apart at a slow pace),
    -- they went into the block one by one, each restarting it, 16 in a
    -- row.
    redis.call('PUBLISH', ARGV[4], 'c ' .. KEYS[1] .. ' ' .. d(an))
    return {math.floor(aimdRate(ar, o, false, k)), 0, an}
  end
  sent = math.min(bound, an) - acn
  local cycle = math.max(now - from, 1)
  local n = since - 0.5
  if afterBlock then
    -- The server's bucket was full when the block ended: what went
    -- through past the burst it held came back at its rate, as a
    -- process measures the cycle after a block (the root's
    -- aimd.cycleRate); a window's quota, spent within the cycle, says
    -- the rate is half the count over it at least.
    n = math.max(since - burst(), since / 2, 1)
  end
  measured = math.min(cur, n * 1000000000 / cycle)
  if slow and cycle > 1000000 and cur * 0.72 > measured then
    -- The pace rose from below the server's rate, whose bucket refilled
    -- meanwhile, and overflowed if it was slow for long: what went through
    -- is then less than the rate. The last second, doubling, sent about
    -- 0.72 of the pace at its end, more than the rate if the bucket held
    -- much: the rate lies between the two.
    measured = math.sqrt(measured * cur * 0.72)
  elseif not slow then
    -- At or about the rate all along: what went through (all but the
    -- throttled one) is the rate, known to one request in sent.
    keep = math.max(beta, 1 - 1 / sent)
  end
  slow = false
end
local wmax = math.min(math.max(measured, aimdFloor), aimdMost)
local rate = math.max(wmax * keep, aimdFloor)
-- The schedule starts again at the new pace, one interval on: the
-- requests booked at the old pace and not yet gone reserve again (they
-- hear of the cut, published below, before they leave). A wait named of
-- blockLeast or more holds the climb until it ends (nothing is sent
-- during it: slow start doubled through it), and the next cut measures
-- from its end, with the burst the server then held taken off.
at = now + math.ceil(1000000000 / rate)
if named >= blockLeast then
  o = math.max(o, now + named)
  hs[#hs + 1] = 'ag'
  hs[#hs + 1] = '1'
end
for _, x in ipairs({'ar', d(wmax), 'ac', d(now), 'as', slow and '1' or '0', 'acn', d(an), 'a1', d(now),
  'at', d(at), 'ab', '0', 'aw', '0', 'ao', d(math.max(o, now))}) do hs[#hs + 1] = x end
save(hs, v[1], math.max(now + aimdLife, at, o), margin, cap, true)
redis.call('PUBLISH', ARGV[4], 'c ' .. KEYS[1] .. ' ' .. d(an))
return {math.floor(rate), 1, an}
`)

// heartbeatScript announces a process for a quota, or withdraws it, and
// returns how many processes are announced. Each member's score is the
// instant (ms of Redis's clock) its announcement ends; one further ahead
// than ten announcements last was not written by a process, and goes.
//
// The announcement comes first: Redis out of memory (maxmemory,
// noeviction) refuses it, as it refuses the reservations' writes, only
// while the script has written nothing; after a removal it would let it
// through, and a heartbeat would say Redis is back while no reservation
// can be recorded.
//
// KEYS[1]: the quota's sorted set of processes; ARGV[1]: the process;
// ARGV[2]: how long the announcement lasts, in ms; ARGV[3]: "1" to
// withdraw.
var heartbeatScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], string.format('%d', now + ttl), ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
redis.call('ZREMRANGEBYSCORE', KEYS[1], string.format('(%d', now + 10 * ttl), '+inf')
local n = redis.call('ZCARD', KEYS[1])
if n > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return n
`)

// The outage scripts keep a key's outage, as the fleet knows it, in a
// hash of its own beside the quota's (the same hash tag: the same slot):
// field "next", the instant the next probe may go (µs of Redis's clock);
// "nom", the same, for processes of an earlier version, which read it;
// "iv", the interval that led to it (µs); "own", the process holding the
// probe turn; "ou", the instant its turn ends (µs); "given", "0" until a
// turn is given, then "1". The probes keep to the schedule of a single
// process (see headway's outage): the first one initial after the first
// report, each next one an interval after the last one failed, the
// interval doubling up to the cap; not jittered, since the fleet sends one
// probe at a time. Every value is checked as the quota's are: one that is not a
// number, is negative, NaN, or an instant further ahead than a week makes
// the record read as absent (no outage), and the next report writes it
// anew. The record expires a margin after its next probe, or after the
// turn held, whichever is later: a fleet that stops reporting leaves no
// outage behind. An instant is never read further ahead than it was
// written: the next probe at most its interval from now, a turn at most
// its length, and what is shortened so is stored (see outageLua); so
// Redis's clock going back (see prelude) holds a probe one interval at
// most, without a high-water mark of the record's own.
//
// Changes are published on the quota's channel as "o <hash> <µs to the
// next probe>" and "o <hash> up", which processes without outage support
// ignore (see heard).

// outageLua follows the prelude of the outage scripts.
const outageLua = `
-- outageOf reads the outage record v (HMGET next, iv, own, ou, nom) and
-- returns its next probe, its interval and the end of its turn (nil, or
-- nil for the probe when no outage is on). An instant up to a week ahead
-- is believed to be a clock's, not garbage: the next probe reads as one
-- interval from now at most, a turn (with its length lease) as lease at
-- most, and what it shortens is stored, with the record's TTL (margin,
-- ms), so that time moves it on.
local function outageOf(v, most, lease, margin)
  local week = 604800000000
  local nxt, iv = valid(v[1], now + week), valid(v[2], most)
  if not nxt or not iv or not valid(v[5], now + week) then return nil end
  local ou = valid(v[4], now + week)
  local hs = {}
  if nxt > now + math.max(iv, 1) then
    nxt = now + math.max(iv, 1)
    hs = {'next', string.format('%d', nxt), 'nom', string.format('%d', nxt)}
  end
  if lease and ou and ou > now + lease then
    ou = now + lease
    hs[#hs + 1] = 'ou'
    hs[#hs + 1] = string.format('%d', ou)
  end
  if #hs > 0 then
    redis.call('HSET', KEYS[1], unpack(hs))
    redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil((math.max(nxt, ou or 0) - now) / 1000) + margin))
  end
  return nxt, iv, ou
end
`

// outageDownScript records that the host of a quota is down, as one
// process found, and returns the wait until the next probe, in µs. With no
// outage on, it starts one, the first probe due ARGV[2] µs from now. From
// the process that holds the turn (ARGV[1]), it ends the turn and puts the
// next probe twice the last interval from now, up to ARGV[3]. From any
// other process it changes nothing, unless no turn was given yet and the
// report asks for an earlier first probe: a stall, reported with the time
// it may last, gives way so to the first failure.
//
// KEYS[1]: the outage hash; ARGV[1]: the process; ARGV[2]: the first
// interval, µs; ARGV[3]: the longest, µs; ARGV[4]: the margin of the TTL,
// ms; ARGV[5]: the channel; ARGV[6]: the name published.
var outageDownScript = redis.NewScript(prelude + outageLua + `
local initial, most = tonumber(ARGV[2]), tonumber(ARGV[3])
local v = redis.call('HMGET', KEYS[1], 'next', 'iv', 'own', 'ou', 'nom', 'given')
local nxt, iv, ou = outageOf(v, most, nil, tonumber(ARGV[4]))
local given = v[6] == '0' and '0' or '1'
if nxt then
  if v[3] == ARGV[1] and ou and ou > now then
    iv = math.min(math.max(2 * iv, initial), most)
  elseif given == '0' and now + initial < nxt then
    iv = initial
  else
    return math.max(nxt - now, 0)
  end
else
  iv = initial
  given = '0'
end
nxt = now + math.max(iv, 1)
redis.call('HSET', KEYS[1], 'next', string.format('%d', nxt), 'nom', string.format('%d', nxt), 'iv', string.format('%d', iv), 'own', '', 'ou', '0', 'given', given)
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil((nxt - now) / 1000) + tonumber(ARGV[4])))
redis.call('PUBLISH', ARGV[5], 'o ' .. ARGV[6] .. ' ' .. string.format('%d', nxt - now))
return nxt - now
`)

// probeTurnScript gives the turn to probe a quota's host that is down to
// process ARGV[1], for ARGV[2] µs at most, when the next probe is due and
// no other process holds the turn. It returns {0, 1} when it gives the
// turn; {wait in µs, 1} until the next probe is due; {wait in µs, 2} until
// the turn another process holds ends; {0, 0} when no outage is on.
//
// KEYS[1]: the outage hash; ARGV[3]: the longest interval, µs; ARGV[4]:
// the margin of the TTL, ms.
var probeTurnScript = redis.NewScript(prelude + outageLua + `
local lease, most = tonumber(ARGV[2]), tonumber(ARGV[3])
local v = redis.call('HMGET', KEYS[1], 'next', 'iv', 'own', 'ou', 'nom')
local nxt, iv, ou = outageOf(v, most, lease, tonumber(ARGV[4]))
if not nxt then return {0, 0} end
if nxt > now then return {nxt - now, 1} end
if ou and ou > now and v[3] ~= '' and v[3] ~= ARGV[1] then return {ou - now, 2} end
redis.call('HSET', KEYS[1], 'own', ARGV[1], 'ou', string.format('%d', now + lease), 'given', '1')
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil(lease / 1000) + tonumber(ARGV[4])))
return {0, 1}
`)

// outageUpScript ends the outage of a quota's host: a process got an
// answer. It publishes the end, if an outage was on, and returns 1 then,
// 0 otherwise.
//
// KEYS[1]: the outage hash; ARGV[1]: the channel; ARGV[2]: the name
// published.
var outageUpScript = redis.NewScript(`
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
redis.call('PUBLISH', ARGV[1], 'o ' .. ARGV[2] .. ' up')
return 1
`)

// intReply checks that v, a script's reply, is an integer.
func intReply(script string, v any) (int64, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, &ReplyError{Script: script, Reply: v, Reason: "want an integer"}
	}
	return n, nil
}

// replyTail is what a reserve script returns after the waits: the time
// left of the pause, and how far ahead the shared schedule is booked
// (until when its buckets are empty: TAT − burst·T), both in µs.
type replyTail struct{ pause, last int64 }

// reserveReply checks that v, a reserve script's reply, is an array of 1
// to want waits from 0 to most µs followed by the time left of the pause,
// from 0 to capUs, and the schedule's last departure, from 0 to most; it
// appends the waits to dst.
func reserveReply(dst []int64, v any, want int, most, capUs int64) (waits []int64, tail replyTail, err error) {
	arr, ok := v.([]any)
	if !ok {
		return dst, tail, &ReplyError{Script: "reserve", Reply: v, Reason: "want an array"}
	}
	if len(arr) < 3 || len(arr) > want+2 {
		return dst, tail, &ReplyError{Script: "reserve", Reply: v, Reason: "wrong number of waits"}
	}
	for i, e := range arr {
		n, ok := e.(int64)
		hi := most
		if i == len(arr)-2 {
			hi = capUs
		}
		if !ok || n < 0 || n > hi {
			return dst, tail, &ReplyError{Script: "reserve", Reply: v, Reason: "want integers from 0 to the cap"}
		}
		switch i {
		case len(arr) - 2:
			tail.pause = n
		case len(arr) - 1:
			tail.last = n
		default:
			dst = append(dst, n)
		}
	}
	return dst, tail, nil
}

// learnedTail splits the two integers a reservation without limits
// returns after its tail (see reserveScript) off v: the count of such
// reservations after it, from 0 to 2e15, and the slowest interval it
// applied, from 0 to a day in µs. It returns the rest of the reply, for
// reserveReply.
func learnedTail(v any) (rest any, t learned, err error) {
	arr, ok := v.([]any)
	if !ok || len(arr) < 4 {
		return v, t, &ReplyError{Script: "reserve", Reply: v, Reason: "want an array"}
	}
	var ok1, ok2, ok3, ok4 bool
	var held int64
	t.seq, ok1 = arr[len(arr)-4].(int64)
	t.pace, ok2 = arr[len(arr)-3].(int64)
	t.cutSeq, ok3 = arr[len(arr)-2].(int64)
	held, ok4 = arr[len(arr)-1].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || t.seq < 0 || t.seq > 2e15 || t.pace < 0 || t.pace > int64(24*time.Hour/time.Microsecond) ||
		t.cutSeq < 0 || t.cutSeq > t.seq || held < 0 || held > 1 {
		return v, t, &ReplyError{Script: "reserve", Reply: v, Reason: "want counts, a pace and a flag in range"}
	}
	t.held = held == 1
	return arr[:len(arr)-4], t, nil
}

// learned is what a reservation without limits says after its tail: its
// count, the pace applied (µs), the count at the last cut, and whether it
// was held for the fleet's probe (nothing spent: it asks again).
type learned struct {
	seq, pace, cutSeq int64
	held              bool
}

// cutReply checks that v, cutScript's reply, is a pace in thousandths of a
// request per second (from aimdFloor up), a flag, 0 or 1, and the count at
// the last cut.
func cutReply(v any) (rate int64, cut bool, cutSeq int64, err error) {
	arr, ok := v.([]any)
	if ok && len(arr) == 3 {
		r, ok1 := arr[0].(int64)
		c, ok2 := arr[1].(int64)
		n, ok3 := arr[2].(int64)
		if ok1 && ok2 && ok3 && r >= aimdFloorMilli && r <= aimdMostMilli && (c == 0 || c == 1) && n >= 0 && n <= 2e15 {
			return r, c == 1, n, nil
		}
	}
	return 0, false, 0, &ReplyError{Script: "cut", Reply: v, Reason: "want a pace in range, a flag and a count"}
}
