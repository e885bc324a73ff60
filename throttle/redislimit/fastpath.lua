-- fastpath.lua: budget.lua's reserve for the common case, unrolled: one
-- token or leaky bucket (gcra.lua) on a key with no pause state. It runs
-- before the rest of the script builds anything, reads the pause state
-- with one EXISTS instead of HMGET, builds no tables (two small local
-- functions stand in for gcra.lua's), and
-- gives the same reply and leaves the same state as the general path to
-- the bit: TestBucketFastPath compares the two step by step. Once a key
-- has a pause state, its reserves take the general path until it
-- expires.
-- Speed only: Redis decisions/s ≥ 0.9× redis_rate, bench/micro
-- RedisDecision; the general path alone reaches 0.67×.
if fast and ARGV[1] == 'reserve' and ARGV[3] == '1' and (ARGV[4] == 'tb' or ARGV[4] == 'lb')
    and #ARGV == 11 and redis.call('EXISTS', KEYS[1]) == 0 then -- 11: no settles ride along
  local interval, sub, burst = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
  local n, maxWait, after = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
  -- gcra.load: the packed seq, latest, epoch, shifted, tat, first, cut,
  -- gone and owe (state.lua, gcra.lua), then the slack entries, kept as
  -- they are in rest.
  local seq, latest, epoch, shifted, tat, first, cut, gone, owe = now, -1, 0, 0, 0, now, now, 0, 0
  local rest = ''
  local raw = redis.call('GET', KEYS[2])
  if raw then
    local next
    seq, latest, epoch, shifted, tat, first, cut, gone, owe, next = struct.unpack('<i8i8i8i8i8i8i8i8i8', raw)
    rest = string.sub(raw, next)
  end
  -- gcra's left: the burst less the span tat lies past at, in whole
  -- units rounded up.
  local function left(at)
    if tat <= at then return burst end
    if sub == 0 then return math.max(burst - ceilDiv(tat - at, interval), 0) end
    return math.max(burst - math.max(ceilDiv((tat - at) * 1000 - owe, interval * 1000 + sub), 0), 0)
  end
  -- gcra.earliest from now+after; then as budget.lua's reserve with no
  -- pause: 0 for the epoch and shifted in the reply, the part's own kept.
  local slot = math.max(now + after, tat + (n - burst) * interval + ceilDiv((n - burst) * sub - owe, 1000))
  if maxWait >= 0 and slot - now > maxWait then
    return {0, slot - now - maxWait, left(now), 0, 0, 0}
  end
  -- gcra.book, then gcra.save: tat - now > 0 here, so never a DEL.
  local before = -1
  if tat >= slot then before = latest end
  local slack = tat - slot -- gcra's slackAt
  if owe > 0 then slack = slack - 1 end
  slack = math.max(slack, 0)
  local gap, owed = 0, 0
  if slot >= tat then gap, owed, tat, owe = slot - tat, owe, slot, 0 end
  local x = n * sub - owe -- gcra's advance
  local q = ceilDiv(x, 1000)
  tat, owe = tat + n * interval + q, q * 1000 - x
  seq = seq + 1
  -- gcra's pushSlack: slack 0 starts a new run (cut = seq); otherwise
  -- the entries at as high a level or higher go, the oldest past 64.
  if slack <= 0 then
    cut, rest = seq, ''
  else
    local level = slack + gone
    while #rest >= 16 do
      local _, l = struct.unpack('<i8i8', rest, #rest - 15)
      if l < level then break end
      rest = string.sub(rest, 1, #rest - 16)
    end
    if #rest >= 16 * 64 then
      cut = math.max(cut, (struct.unpack('<i8', rest)))
      rest = string.sub(rest, 17)
    end
    rest = rest .. struct.pack('<i8i8', seq, level)
  end
  redis.call('SET', KEYS[2], struct.pack('<i8i8i8i8i8i8i8i8i8', seq, seq, epoch, shifted, tat, first, cut, gone, owe) .. rest, 'PX', millis(tat - now))
  return {1, slot - now, left(slot), 0, 0, slot, string.format('%d:%d:%d:%d', seq, before, gap, owed)} -- token(seq, before, gap, owed)
end
