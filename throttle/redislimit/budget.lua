-- budget.lua takes, cancels or pauses units of one budget key, atomically.
--
-- KEYS[1] is the key's pause state, KEYS[2..] the parts' state: one per
-- limit on the key, all under one hash tag. Times are microseconds of the
-- server's TIME, plus ARGV[2], a test-only offset that is 0 in production.
--
-- ARGV: op ('r' reserve, 'c' cancel, 'p' pause), offset, number of parts,
-- then five arguments per part (algorithm and four parameters), then the
-- op's own arguments.
--
-- The pause state (a hash) holds u, the end of the current pause; m, the
-- total shift pauses have applied; a, when the last pause was applied; e,
-- the epoch: the time the hash was created, so that a budget reset by a
-- restart or an expiry is told apart from the one before. A part records
-- the e and m it has applied, and applies what it has not yet (a pause
-- made through another limiter on the key) when it is next touched.
local op = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(ARGV[2])
local nparts = tonumber(ARGV[3])
local base = 4 + 5 * nparts

local function fmt(x)
  return string.format('%d', x)
end

-- The common case, a reservation on one token bucket, is the general path
-- below (load, sync, earliest, book, save) unrolled for it: no closures or
-- tables to build, and the same state, TTL and reply to the bit.
if op == 'r' and nparts == 1 and ARGV[4] == 'tb' then
  local x, y = tonumber(ARGV[5]), tonumber(ARGV[6])
  local n, maxWait = tonumber(ARGV[9]), tonumber(ARGV[10])
  local pv = redis.call('HMGET', KEYS[1], 'u', 'm', 'a', 'e')
  local pu, pm, pa, pe = tonumber(pv[1]) or 0, tonumber(pv[2]) or 0, tonumber(pv[3]) or 0, tonumber(pv[4]) or 0
  local raw = redis.call('GET', KEYS[2])
  local s, o, e, m, tat = 0, -1, 0, 0, 0
  if raw then s, o, e, m, tat = struct.unpack('<i8i8i8i8i8', raw) end
  if pe ~= 0 then
    if raw then
      local d = pm
      if e == pe then d = pm - m end
      if d > 0 then
        if tat < pa then o = -1 end
        tat = math.max(tat, pa) + d
      end
    end
    e, m = pe, pm
  end
  local slot = math.max(now, pu, tat + n * x - y * x)
  if maxWait >= 0 and slot - now - maxWait > 0 then
    local left = math.floor(math.max(y * x - math.max(tat - now, 0), 0) / x)
    return {0, slot - now - maxWait, left, pe, pm, 0}
  end
  local prev = -1
  if tat >= slot then prev = o end
  tat = math.max(tat, slot) + n * x
  s = s + 1
  redis.call('SET', KEYS[2], struct.pack('<i8i8i8i8i8', s, s, e, m, tat), 'PX', math.floor((tat - now) / 1000) + 1)
  local left = math.floor(math.max(y * x - (tat - slot), 0) / x)
  return {1, slot - now, left, pe, pm, slot, fmt(s) .. ':' .. fmt(prev)}
end

local pv = redis.call('HMGET', KEYS[1], 'u', 'm', 'a', 'e')
local P = {
  u = tonumber(pv[1]) or 0,
  m = tonumber(pv[2]) or 0,
  a = tonumber(pv[3]) or 0,
  e = tonumber(pv[4]) or 0,
}

-- millis returns ttl microseconds as whole milliseconds, rounded up.
local function millis(ttl)
  return math.floor(ttl / 1000) + 1
end

-- expire sets key's TTL to ttl microseconds, rounded up to a millisecond,
-- or deletes it when it holds nothing worth keeping.
local function expire(key, ttl)
  if ttl <= 0 then
    redis.call('DEL', key)
  else
    redis.call('PEXPIRE', key, millis(ttl))
  end
end

-- A part other than the sliding log keeps its numbers in one string, as
-- packed 64-bit integers: one GET, and one SET with its TTL, cost Redis
-- far less than HMGET, HSET and PEXPIRE of a hash. p.f holds them by
-- name while the script runs: s is the booking count, o the seq of the
-- booking that may still be cancelled in full (-1: none), e and m the
-- pause state applied, then the algorithm's own.
local function loadPacked(p, names)
  p.names = {'s', 'o', 'e', 'm'}
  for _, n in ipairs(names) do p.names[#p.names + 1] = n end
  p.layout = '<' .. string.rep('i8', #p.names)
  local raw = redis.call('GET', p.key)
  p.new = not raw
  p.f = {}
  local v = {}
  if raw then v = {struct.unpack(p.layout, raw)} end
  for i, n in ipairs(p.names) do p.f[n] = v[i] or 0 end
  if p.new then p.f.o = -1 end
end

local function savePacked(p, ttl)
  if ttl <= 0 then
    redis.call('DEL', p.key)
    return
  end
  local v = {}
  for i, n in ipairs(p.names) do v[i] = p.f[n] end
  redis.call('SET', p.key, struct.pack(p.layout, unpack(v)), 'PX', millis(ttl))
end

local A = {}

-- GCRA: tb (token bucket) and lb (leaky bucket). x is the interval, y the
-- burst (tb) or the queue (lb). t is the theoretical arrival time.
local gcra = {}
gcra.load = function(p) loadPacked(p, {'t'}) end
gcra.save = function(p) savePacked(p, p.f.t - now) end
gcra.earliest = function(p, from, n)
  local f, cost = p.f, n * p.x
  if p.algo == 'tb' then
    return math.max(from, f.t + cost - p.y * p.x), 0
  end
  local slot = math.max(from, f.t)
  return slot, slot + cost - p.y * p.x
end
gcra.left = function(p)
  return math.floor(math.max(p.y * p.x - math.max(p.f.t - now, 0), 0) / p.x)
end
gcra.book = function(p, slot, n)
  local f = p.f
  local prev = -1
  if f.t >= slot then prev = f.o end
  f.t = math.max(f.t, slot) + n * p.x
  f.s = f.s + 1
  f.o = f.s
  local from = slot
  if p.algo == 'lb' then from = now end
  local left = math.floor(math.max(p.y * p.x - (f.t - from), 0) / p.x)
  return left, fmt(f.s) .. ':' .. fmt(prev)
end
gcra.give = function(p, tok, n)
  local f = p.f
  if f.o ~= tok[1] then return false end
  f.t = f.t - n * p.x
  f.o = tok[2]
  return true
end
gcra.shift = function(p, at, d)
  local f = p.f
  if f.t < at then f.o = -1 end
  f.t = math.max(f.t, at) + d
end
A.tb = gcra
A.lb = gcra

-- fw: fixed windows of y aligned to the epoch plus z; x is the limit and
-- w the tolerance: a unit booked in the last w of a window counts in the
-- next one too. w is the cursor window, c its count, sp the units of c
-- in its tail, l the latest slot booked.
local fw = {}
local function fwin(p, at) return math.floor((at - p.z) / p.y) end
local function fstart(p, k) return k * p.y + p.z end
local function ftail(p, at) return p.w > 0 and fwin(p, at + p.w) ~= fwin(p, at) end
local function fcount(p, k)
  if k == p.f.w then return p.f.c end
  if k == p.f.w + 1 then return p.f.sp end
  return 0
end
fw.load = function(p) loadPacked(p, {'w', 'c', 'sp', 'l'}) end
fw.save = function(p) savePacked(p, fstart(p, p.f.w + 2) - now) end
fw.earliest = function(p, from, n)
  local at = math.max(from, p.f.l)
  local k = math.max(fwin(p, at), p.f.w)
  at = math.max(at, fstart(p, k))
  for _ = 1, 3 do
    if fcount(p, k) + n <= p.x then return at, 0 end
    k = k + 1
    at = fstart(p, k)
  end
  return at, 0
end
fw.left = function(p)
  local k = fwin(p, now)
  if p.f.l > now or k < p.f.w then return 0 end
  return math.max(p.x - fcount(p, k), 0)
end
fw.book = function(p, slot, n)
  local f = p.f
  local k = fwin(p, slot)
  local prev = -1
  if k > f.w then
    f.c = n
    if k == f.w + 1 then f.c = f.sp + n end
    f.w, f.sp = k, 0
  else
    prev = f.o
    f.c = f.c + n
  end
  if ftail(p, slot) then f.sp = f.sp + n end
  f.l = math.max(f.l, slot)
  f.s = f.s + 1
  f.o = f.s
  return math.max(p.x - f.c, 0), fmt(f.s) .. ':' .. fmt(prev) .. ':' .. fmt(f.w) .. ':' .. fmt(slot)
end
fw.give = function(p, tok, n)
  local f = p.f
  if f.o ~= tok[1] or f.w ~= tok[3] then return false end
  f.c = math.max(f.c - n, 0)
  if tok[4] and ftail(p, tok[4]) then f.sp = math.max(f.sp - n, 0) end
  f.o = tok[2]
  return true
end
fw.shift = function(p, at, d)
  local f = p.f
  if f.l <= at then return end
  f.l = f.l + d
  local k = fwin(p, f.l)
  if k > f.w then
    -- The shifted units may now fall in window k: count them all there.
    f.w = k
    if ftail(p, f.l) then f.sp = f.c else f.sp = 0 end
    f.o = -1
  end
end
A.fw = fw

-- swc: sliding window counter over windows of y aligned to the epoch; x
-- is the limit. w is the cursor window, c its count, q the count of the
-- window before it, l the latest slot booked.
local swc = {}
local function sview(p, k)
  local f = p.f
  if k == f.w then return f.c, f.q end
  if k == f.w + 1 then return 0, f.c end
  return 0, 0
end
-- sest estimates the units in the window ending at at, rounded up:
-- c + ceil(q × (y-1-e) / y), e being how far at lies into its window.
local function sest(p, at)
  local k = math.floor(at / p.y)
  if k < p.f.w then return p.x end
  local c, q = sview(p, k)
  return c + math.ceil(q * (p.y - 1 - (at - k * p.y)) / p.y)
end
swc.load = function(p) loadPacked(p, {'w', 'c', 'q', 'l'}) end
swc.save = function(p) savePacked(p, (p.f.w + 2) * p.y - now) end
swc.earliest = function(p, from, n)
  local at = math.max(from, p.f.l)
  for _ = 1, 4 do
    local k = math.floor(at / p.y)
    local c, q = sview(p, k)
    local room = p.x - n - c
    if room >= 0 then
      if q == 0 then return at, 0 end
      -- n fits e into window k when q × (y-1-e) <= room × y.
      local e = p.y - 1 - math.floor(room * p.y / q)
      return math.max(at, k * p.y + e), 0
    end
    at = (k + 1) * p.y
  end
  return at, 0
end
swc.left = function(p)
  if p.f.l > now then return 0 end
  return math.max(p.x - math.ceil(sest(p, now)), 0)
end
swc.book = function(p, slot, n)
  local f = p.f
  local k = math.floor(slot / p.y)
  local prev = -1
  if k > f.w then
    if k == f.w + 1 then f.q = f.c else f.q = 0 end
    f.w, f.c = k, n
  else
    prev = f.o
    f.c = f.c + n
  end
  f.l = math.max(f.l, slot)
  f.s = f.s + 1
  f.o = f.s
  return math.max(p.x - math.ceil(sest(p, slot)), 0), fmt(f.s) .. ':' .. fmt(prev) .. ':' .. fmt(f.w)
end
swc.give = fw.give
swc.shift = function(p, at, d)
  local f = p.f
  if f.l <= at then return end
  f.l = f.l + d
  local k = math.floor(f.l / p.y)
  if k > f.w then
    -- Count the shifted units in window k and in the one before it.
    f.w, f.q = k, f.c
    f.o = -1
  end
end
A.swc = swc

-- sl: the exact sliding log, a sorted set of slots, one member per unit
-- ("seq:i"), limit x, window y. Its own counters live in members with
-- negative scores: #s (seq), #e and #m (the pause it has applied).
local sl = {}
local marks = 3
local function enc(v) return -(v + 1) end
sl.load = function(p)
  local v = redis.call('ZMSCORE', p.key, '#s', '#e', '#m')
  p.new = not v[1]
  p.f = {s = 0, e = 0, m = 0}
  if not p.new then
    p.f.s, p.f.e, p.f.m = -tonumber(v[1]) - 1, -tonumber(v[2]) - 1, -tonumber(v[3]) - 1
  end
  redis.call('ZREMRANGEBYSCORE', p.key, 0, now - p.y)
  p.n = redis.call('ZCOUNT', p.key, 0, '+inf')
  p.last = 0
  if p.n > 0 then
    local top = redis.call('ZRANGE', p.key, -1, -1, 'WITHSCORES')
    p.last = tonumber(top[2])
  end
end
sl.save = function(p)
  local f = p.f
  redis.call('ZADD', p.key, enc(f.s), '#s', enc(f.e), '#e', enc(f.m), '#m')
  expire(p.key, p.last + p.y - now)
end
sl.earliest = function(p, from, n)
  local at = math.max(from, p.last)
  if p.n + n <= p.x then return at, 0 end
  local r = marks + p.n - p.x + n - 1
  local e = redis.call('ZRANGE', p.key, r, r, 'WITHSCORES')
  return math.max(at, tonumber(e[2]) + p.y), 0
end
sl.left = function(p)
  return math.max(p.x - redis.call('ZCOUNT', p.key, '(' .. fmt(now - p.y), '+inf'), 0)
end
sl.book = function(p, slot, n)
  local f = p.f
  f.s = f.s + 1
  local i = 1
  while i <= n do
    local args = {}
    for j = i, math.min(n, i + 999) do
      args[#args + 1] = fmt(slot)
      args[#args + 1] = fmt(f.s) .. ':' .. fmt(j)
    end
    redis.call('ZADD', p.key, unpack(args))
    i = i + 1000
  end
  p.n, p.last = p.n + n, slot
  if p.n > p.x then
    redis.call('ZREMRANGEBYRANK', p.key, marks, marks + p.n - p.x - 1)
    p.n = p.x
  end
  local used = redis.call('ZCOUNT', p.key, '(' .. fmt(slot - p.y), '+inf')
  return math.max(p.x - used, 0), fmt(f.s)
end
sl.give = function(p, tok, n)
  local gone = 0
  local i = 1
  while i <= n do
    local args = {}
    for j = i, math.min(n, i + 999) do
      args[#args + 1] = fmt(tok[1]) .. ':' .. fmt(j)
    end
    gone = gone + redis.call('ZREM', p.key, unpack(args))
    i = i + 1000
  end
  if gone > 0 and p.n > gone then
    local top = redis.call('ZRANGE', p.key, -1, -1, 'WITHSCORES')
    p.last = tonumber(top[2])
  end
  p.n = p.n - gone
  return gone > 0
end
sl.shift = function(p, at, d)
  local later = redis.call('ZRANGEBYSCORE', p.key, '(' .. fmt(at), '+inf', 'WITHSCORES')
  for i = 1, #later, 2 do
    redis.call('ZADD', p.key, fmt(tonumber(later[i + 1]) + d), later[i])
  end
  if p.last > at then p.last = p.last + d end
end
A.sl = sl

-- sync applies the pauses the part has not applied yet.
local function sync(p)
  if P.e == 0 then return end
  local f = p.f
  if not p.new then
    local d = P.m
    if f.e == P.e then d = P.m - f.m end
    if d > 0 then A[p.algo].shift(p, P.a, d) end
  end
  f.e, f.m = P.e, P.m
end

local parts = {}
for i = 1, nparts do
  local j = 4 + 5 * (i - 1)
  local p = {
    key = KEYS[i + 1], algo = ARGV[j],
    x = tonumber(ARGV[j + 1]), y = tonumber(ARGV[j + 2]),
    z = tonumber(ARGV[j + 3]), w = tonumber(ARGV[j + 4]),
  }
  if not A[p.algo] then return redis.error_reply('ERR redislimit: unknown algorithm ' .. tostring(p.algo)) end
  A[p.algo].load(p)
  sync(p)
  parts[i] = p
end

if op == 'r' then
  local n, maxWait = tonumber(ARGV[base]), tonumber(ARGV[base + 1])
  -- Every part is monotone (a slot that fits keeps fitting later), so
  -- raising the common slot to each part's earliest converges.
  local slot, notBefore = math.max(now, P.u), now
  local settled = false
  for _ = 1, 64 do
    settled = true
    for _, p in ipairs(parts) do
      local s, nb = A[p.algo].earliest(p, slot, n)
      if nb > notBefore then notBefore = nb end
      if s > slot then slot, settled = s, false end
    end
    if settled then break end
  end
  if not settled then return redis.error_reply('ERR redislimit: parts found no common slot') end
  -- A pause shifted the schedule to its end, so a booking made during it
  -- is judged as of then: a leaky bucket's line must not count the pause
  -- itself as units waiting.
  if notBefore <= P.u then notBefore = now end
  local wait = notBefore - now
  if maxWait >= 0 then wait = math.max(wait, slot - now - maxWait) end
  local left = -1
  if wait > 0 then
    for _, p in ipairs(parts) do
      local l = A[p.algo].left(p)
      if left < 0 or l < left then left = l end
    end
    return {0, wait, left, P.e, P.m, 0}
  end
  local reply = {1, slot - now, 0, P.e, P.m, slot}
  for i, p in ipairs(parts) do
    local l, tok = A[p.algo].book(p, slot, n)
    A[p.algo].save(p)
    if left < 0 or l < left then left = l end
    reply[6 + i] = tok
  end
  reply[3] = left
  return reply
elseif op == 'c' then
  local n, be, bm, slot = tonumber(ARGV[base]), tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3])
  local delta = 0
  if P.e ~= 0 and be == P.e then
    delta = P.m - bm
  elseif P.e ~= 0 and be == 0 then
    delta = P.m
  end
  if slot + delta < now then return 0 end -- the units have been used
  local given = 0
  for i, p in ipairs(parts) do
    local tok = {}
    for v in string.gmatch(ARGV[base + 3 + i], '[^:]+') do tok[#tok + 1] = tonumber(v) end
    if not p.new and A[p.algo].give(p, tok, n) then
      A[p.algo].save(p)
      given = 1
    end
  end
  return given
elseif op == 'p' then
  local d, channel = tonumber(ARGV[base]), ARGV[base + 1]
  local stop = now + d
  if stop <= P.u then return {0, P.e, P.m} end -- pauses do not compound
  local by = stop - math.max(P.u, now)
  if P.e == 0 then P.e = now end
  P.u, P.m, P.a = stop, P.m + by, now
  redis.call('HSET', KEYS[1], 'u', fmt(P.u), 'm', fmt(P.m), 'a', fmt(P.a), 'e', fmt(P.e))
  local ttl = math.max(stop - now, redis.call('PTTL', KEYS[1]) * 1000)
  for _, p in ipairs(parts) do
    if not p.new then
      -- sync brought the part up to the pause state before this one.
      A[p.algo].shift(p, now, by)
      p.f.e, p.f.m = P.e, P.m
      A[p.algo].save(p)
      ttl = math.max(ttl, redis.call('PTTL', p.key) * 1000)
    end
  end
  expire(KEYS[1], ttl + 1000000)
  redis.call('PUBLISH', channel, fmt(P.e) .. ' ' .. fmt(P.m) .. ' ' .. KEYS[1])
  return {1, P.e, P.m}
end
return redis.error_reply('ERR redislimit: unknown op ' .. tostring(op))
