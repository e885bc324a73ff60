-- state.lua: how a part keeps its state. It follows now.lua and
-- fastpath.lua; the files after it add one algorithm each (gcra.lua,
-- fixedwindow.lua, slidingwindow.lua, slidingwindowcounter.lua), then
-- pause.lua and budget.lua, which reads the arguments and runs the op.

-- defines maps an algorithm's name to the function that builds its
-- table, so that a call builds only the algorithms its parts use: Redis
-- runs the whole script body on every call, and Redis's time per call is
-- what BenchmarkRedisDecision (≥ 0.9× redis_rate) comes down to.
-- algorithms holds those built, by name. An algorithm's table has:
--   params            the names of its parameters, in ARGV order
--   load(p)           reads the part's state into p
--   save(p)           writes it back, with a TTL no shorter than its time
--                     to return to fresh
--   earliest(p, at, n) the earliest slot >= at where n units fit
--   remaining(p)      how many units could be taken now
--   ahead(p)          how many units are booked for slots still ahead
--   book(p, slot, n)  takes n units at slot; returns what remains and the
--                     booking's token, which cancel hands back
--   give(p, token, n) gives back a booking if that keeps the bound
--   shift(p, at, d)   moves every slot after at later by d (a pause)
--   settle(p, tok, n, delta, slot, stale, id)
--                     charges (delta > 0) or gives back (delta < 0) the
--                     difference between a booking's actual cost and its
--                     n units, at slot, where the booking is due now;
--                     tok is nil for a part that booked nothing. stale:
--                     the part's state is not the one booked (see
--                     settle.lua)
local defines, algorithms = {}, {}

local function fmt(x)
  return string.format('%d', x)
end

-- A part other than the sliding log keeps its numbers in one string of
-- packed 64-bit integers: one GET, and one SET with its TTL, cost Redis
-- far less than a hash. p.state holds them by name while the script runs:
--   seq     how many bookings the part has made
--   latest  the seq of the booking that may still be cancelled in full
--           (-1: none)
--   epoch   the pause epoch the part has applied
--   shifted the pause shift the part has applied
-- then the algorithm's own fields. Read one with redis-cli:
--   EVAL "return {struct.unpack('<i8i8i8i8i8', redis.call('GET', KEYS[1]))}" 1 <key>
local function packed(fields)
  local all = {'seq', 'latest', 'epoch', 'shifted'}
  for _, f in ipairs(fields) do all[#all + 1] = f end
  return {fields = all, layout = '<' .. string.rep('i8', #all)}
end

-- loadPacked reads part p's state, laid out as packed(...) says.
-- Bytes past the fields, which an algorithm may keep (the token bucket's
-- slack), are kept in p.rest as they are.
local function loadPacked(p, layout)
  p.layout = layout
  local raw = redis.call('GET', p.key)
  p.new = not raw
  p.state = {}
  p.rest = ''
  local v = {}
  if raw then
    v = {struct.unpack(layout.layout, raw)}
    p.rest = string.sub(raw, v[#layout.fields + 1])
  end
  for i, f in ipairs(layout.fields) do p.state[f] = v[i] or 0 end
  if p.new then p.state.latest = -1 end
end

-- savePacked writes p.state with a TTL of ttl microseconds, or deletes the
-- key when it holds nothing worth keeping.
local function savePacked(p, ttl)
  if ttl <= 0 then
    redis.call('DEL', p.key)
    return
  end
  local v = {}
  for i, f in ipairs(p.layout.fields) do v[i] = p.state[f] end
  redis.call('SET', p.key, struct.pack(p.layout.layout, unpack(v)) .. p.rest, 'PX', millis(ttl))
end

-- token joins a booking's numbers into the text cancel hands back.
local tokenFormats = {'%d', '%d:%d', '%d:%d:%d', '%d:%d:%d:%d'}
local function token(...)
  return string.format(tokenFormats[select('#', ...)], ...)
end

-- tokens splits a token back into its numbers; '-', the token of a part
-- that booked nothing, gives nil.
local function tokens(text)
  if text == '-' then return nil end
  local tok = {}
  for v in string.gmatch(text, '[^:]+') do tok[#tok + 1] = tonumber(v) end
  return tok
end
