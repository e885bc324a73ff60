-- stated.lua: what the upstream stated about its quotas, kept beside the
-- budget and applied in the script call that carries it (stated.go,
-- WithStated). A budget whose limits follow the upstream sends, on every
-- call, one argument before the settles (budget.lua):
--   @ unit... then, per statement learned since the key's last call,
--   name unit kind remaining sentAgo arrivedAgo reset precision
-- with one unit per limit ('-' for a limit that follows nothing); kind
-- 'r' for a quota that refills (a token bucket: OpenAI's, Anthropic's) or
-- 'w' for a window's; sentAgo and arrivedAgo how long (µs) before this
-- call the stated request was sent and its answer arrived; reset (µs)
-- how long after the answer the quota returns, stated to precision (µs).
-- KEYS[#parts + 2] is the key's record, a hash under the budget's hash
-- tag, with, per quota name N:
--   N:unit       the unit it counts
--   N:kind       'window' or 'refills'
--   N:remaining  what the upstream said was left
--   N:sent       when the stated request was sent (server µs)
--   N:reset      when the quota returns (a refilling one: is full)
--   N:left       a window's: what may still be booked before N:reset
--   N:precision  a window's: how finely its reset was stated (µs)
-- and, per unit u the budget follows, ring:u: the latest bookings in u,
-- packed '<i8' lost, then (slot, units) pairs '<i8i8', oldest first, at
-- most ringMax; lost is the latest slot of the pairs dropped. A
-- statement counts the units booked for slots after its request was
-- sent, which the upstream had not seen; one older than the ring reaches
-- back is not applied. redis-cli reads the ring with
--   EVAL "local r = redis.call('HGET', KEYS[1], ARGV[1]) return {struct.unpack('<i8' .. string.rep('i8i8', (#r - 8) / 16), r)}" 1 <key> ring:<unit>
local stated = {}

-- ringMax bounds the bookings a ring keeps: it must reach back past the
-- units in flight and booked ahead when an answer comes back.
-- ringKeep (µs) is how long a booking stays in the ring, and the record
-- past its latest slot or reset.
local ringMax, ringKeep = 128, 120 * 1000000

-- maxHold (µs) bounds how long one statement may hold a bucket back from
-- now, as throttle.DefaultMaxHold does in process: a hostile or broken
-- upstream saying "0 left" of a daily quota stalls a key a minute, not a
-- day. (A window's reset is clamped to it before it is sent.)
local maxHold = 60 * 1000000

-- set changes field k of the record, to be saved.
local function set(S, k, v)
  S.h[k], S.changed[k] = v, true
end

-- ring returns unit's ring: lost, and the packed pairs.
local function ring(S, unit)
  local r = S.h['ring:' .. unit]
  if not r or #r < 8 then return 0, '' end
  return (struct.unpack('<i8', r)), string.sub(r, 9)
end

-- unseen returns the units of unit booked for slots in (from, to), or
-- nil when the ring no longer reaches back to from.
local function unseen(S, unit, from, to)
  local lost, e = ring(S, unit)
  if lost > from then return nil end
  local n = 0
  for i = 1, #e - 15, 16 do
    local slot, k = struct.unpack('<i8i8', e, i)
    if slot > from and slot < to then n = n + k end
  end
  return n
end

-- unitCosts returns, per unit followed, the most any of its limits
-- books of costs: {{unit, cost}, ...}.
local function unitCosts(S, costs)
  local out, at = {}, {}
  for i, u in pairs(S.unit) do
    local c = costs[i] or 0
    if at[u] then
      out[at[u]][2] = math.max(out[at[u]][2], c)
    else
      out[#out + 1] = {u, c}
      at[u] = #out
    end
  end
  return out
end

-- load reads the record at key and the argument text for parts.
function stated.load(parts, text, key)
  local f = {}
  for v in string.gmatch(text, '%S+') do f[#f + 1] = v end
  local S = {key = key, parts = parts, unit = {}, h = {}, changed = {}, windows = {}, statements = {}, horizon = now}
  for i = 1, #parts do
    if f[1 + i] and f[1 + i] ~= '-' then S.unit[i] = f[1 + i] end
  end
  local all = redis.call('HGETALL', key)
  for j = 1, #all, 2 do S.h[all[j]] = all[j + 1] end
  for k, v in pairs(S.h) do
    local name = string.match(k, '^(.*):kind$')
    local reset = name and tonumber(S.h[name .. ':reset'])
    if v == 'window' and reset and reset > now then
      S.windows[name] = {unit = S.h[name .. ':unit'], reset = reset, left = tonumber(S.h[name .. ':left']) or 0}
    end
  end
  for j = 2 + #parts, #f - 7, 8 do
    S.statements[#S.statements + 1] = {name = f[j], unit = f[j + 1], kind = f[j + 2], remaining = tonumber(f[j + 3]),
      sent = now - tonumber(f[j + 4]), arrived = now - tonumber(f[j + 5]), reset = tonumber(f[j + 6]), precision = tonumber(f[j + 7])}
  end
  return S
end

-- record keeps what statement s said, under its name.
local function record(S, s, kind, reset)
  local n = s.name
  set(S, n .. ':unit', s.unit)
  set(S, n .. ':kind', kind)
  set(S, n .. ':remaining', fmt(s.remaining))
  set(S, n .. ':sent', fmt(s.sent))
  set(S, n .. ':reset', fmt(reset))
  S.horizon = math.max(S.horizon, reset)
end

-- refill applies s, a refilling quota's statement: each token or leaky
-- bucket following its unit held at most s.remaining when the stated
-- request was sent, and owes every unit booked for a later slot since.
-- Its tat moves no earlier; a later tat gives nothing back on a cancel
-- (latest -1), as after a pause.
local function refill(S, s)
  record(S, s, 'refills', s.arrived + s.reset)
  local x = unseen(S, s.unit, s.sent, math.huge)
  if not x then return end
  for i, p in ipairs(S.parts) do
    if S.unit[i] == s.unit and (p.algo == 'tb' or p.algo == 'lb') then
      local owed = p.burst - s.remaining + x
      local st = p.state
      if owed > 0 then
        local tat = s.sent + owed * p.interval + ceilDiv(owed * p.sub, 1000)
        -- the next unit no later than maxHold from now
        tat = math.min(tat, math.max(st.tat, now + maxHold + (p.burst - 1) * p.interval + ceilDiv((p.burst - 1) * p.sub, 1000)))
        if tat > st.tat then
          st.tat, st.owe, st.latest = tat, 0, -1
          p.settled, p.new = true, false
        end
      end
    end
  end
end

-- window applies s, a window's statement "remaining more before reset":
-- less the units booked since the request was sent, it bounds bookings
-- before the reset. Two resets within their precision state one window:
-- the statement for the request sent later wins; an older one, arrived
-- late, wins only if it leaves less; the earlier reset stands. A reset
-- earlier than that is a window already over, and changes nothing.
local function window(S, s)
  local reset = s.arrived + s.reset
  if reset <= now then return end
  local x = unseen(S, s.unit, s.sent, reset)
  if not x then return end
  local n = s.name
  local left, sent, remaining, precision = s.remaining - x, s.sent, s.remaining, s.precision
  local w = S.windows[n]
  if w then
    local p = math.max(precision, tonumber(S.h[n .. ':precision']) or 0)
    if reset < w.reset - p then return end
    if reset <= w.reset + p then
      local sent0 = tonumber(S.h[n .. ':sent']) or 0
      if sent < sent0 then
        left, sent, remaining = math.min(left, w.left), sent0, tonumber(S.h[n .. ':remaining'])
      end
      reset = math.min(reset, w.reset)
      precision = math.min(precision, tonumber(S.h[n .. ':precision']) or precision)
    end
  end
  record(S, {name = n, unit = s.unit, remaining = remaining, sent = sent}, 'window', reset)
  set(S, n .. ':left', fmt(left))
  set(S, n .. ':precision', fmt(precision))
  S.windows[n] = {unit = s.unit, reset = reset, left = left}
end

-- save writes the fields changed, and keeps the record ringKeep past its
-- latest reset or slot.
function stated.save(S)
  local kv = {}
  for k in pairs(S.changed) do
    kv[#kv + 1] = k
    kv[#kv + 1] = S.h[k]
  end
  if #kv == 0 then return end
  S.changed = {}
  redis.call('HSET', S.key, unpack(kv))
  local ttl = math.max(redis.call('PTTL', S.key) * 1000, S.horizon - now + ringKeep)
  redis.call('PEXPIRE', S.key, millis(ttl))
end

-- apply applies the statements the call carries, before the op.
function stated.apply(S)
  for _, s in ipairs(S.statements) do
    if s.kind == 'r' then refill(S, s) else window(S, s) end
  end
  stated.save(S)
end

-- earliest returns the earliest slot >= at where every window statement
-- admits costs: a window without enough left holds the slot to its
-- reset. Monotone, as budget.lua's earliest needs.
function stated.earliest(S, at, costs)
  for _, uc in ipairs(unitCosts(S, costs)) do
    for _, w in pairs(S.windows) do
      if w.unit == uc[1] and uc[2] > 0 and at < w.reset and w.left < uc[2] then at = w.reset end
    end
  end
  return at
end

-- remaining returns least, or less when a window statement leaves less
-- before its reset.
function stated.remaining(S, least)
  for _, w in pairs(S.windows) do
    if w.reset > now and w.left < least then least = math.max(w.left, 0) end
  end
  return least
end

-- book records a booking of costs at slot: in each unit's ring, and
-- against the windows it falls before the reset of.
function stated.book(S, slot, costs)
  for _, uc in ipairs(unitCosts(S, costs)) do
    local u, c = uc[1], uc[2]
    if c > 0 then
      local lost, e = ring(S, u)
      e = e .. struct.pack('<i8i8', slot, c)
      while #e > 16 * ringMax or (#e > 16 and (struct.unpack('<i8', e)) < now - ringKeep) do
        lost = math.max(lost, (struct.unpack('<i8', e)))
        e = string.sub(e, 17)
      end
      set(S, 'ring:' .. u, struct.pack('<i8', lost) .. e)
      for n, w in pairs(S.windows) do
        if w.unit == u and slot < w.reset then
          w.left = w.left - c
          set(S, n .. ':left', fmt(w.left))
        end
      end
    end
  end
  S.horizon = math.max(S.horizon, slot)
  stated.save(S)
end
