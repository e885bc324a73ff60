-- now.lua opens the budget script: the server's time, how long keys
-- are kept, and ceilDiv. fastpath.lua follows, then state.lua and the rest.
--
-- Times are microseconds of the server's TIME. ARGV[2] is a test-only
-- frozen time: 0 in production, where the script reads TIME. A negative
-- one freezes the time at -ARGV[2] and turns the fast path off (see
-- fastpath.lua).
local now = tonumber(ARGV[2])
local fast = now >= 0
if not fast then now = -now end
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Keys expire in real time, also while a test holds the time frozen:
-- then they are kept an hour longer, so that a slow test never sees one
-- expire under it.
local keep = 0
if ARGV[2] ~= '0' then keep = 3600 * 1000 end

-- millis returns ttl microseconds as whole milliseconds, rounded up, for
-- a key's TTL.
local function millis(ttl)
  return math.floor(ttl / 1000) + 1 + keep
end

-- ceilDiv returns ceil(x / d), exact for whole x and d below 2^53. The
-- bucket (gcra.lua) and its fast path (fastpath.lua) both use it.
local function ceilDiv(x, d)
  local r = math.fmod(x, d)
  local q = (x - r) / d
  if r > 0 then q = q + 1 end
  return q
end
