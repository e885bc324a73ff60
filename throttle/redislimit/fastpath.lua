-- fastpath.lua: budget.lua's reserve for the common case, unrolled: one
-- token or leaky bucket (gcra.lua) on a key with no pause state. It runs
-- before the rest of the script builds anything, reads the pause state
-- with one EXISTS instead of HMGET, builds no tables or closures, and
-- gives the same reply and leaves the same state as the general path to
-- the bit: TestBucketFastPath compares the two step by step. Once a key
-- has a pause state, its reserves take the general path until it
-- expires.
-- Speed only: Redis decisions/s ≥ 0.9× redis_rate, bench/micro
-- RedisDecision; the general path alone reaches 0.67×.
if fast and ARGV[1] == 'reserve' and ARGV[3] == '1' and (ARGV[4] == 'tb' or ARGV[4] == 'lb')
    and #ARGV == 10 and redis.call('EXISTS', KEYS[1]) == 0 then -- 10: no settles ride along
  local interval, burst = tonumber(ARGV[5]), tonumber(ARGV[6])
  local n, maxWait, after = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
  -- gcra.load: the packed seq, latest, epoch, shifted, tat, first, cut
  -- and gone (state.lua, gcra.lua), then the slack entries, kept as they
  -- are in rest.
  local seq, latest, epoch, shifted, tat, first, cut, gone = now, -1, 0, 0, 0, now, now, 0
  local rest = ''
  local raw = redis.call('GET', KEYS[2])
  if raw then
    local next
    seq, latest, epoch, shifted, tat, first, cut, gone, next = struct.unpack('<i8i8i8i8i8i8i8i8', raw)
    rest = string.sub(raw, next)
  end
  -- gcra.earliest from now+after; then as budget.lua's reserve with no
  -- pause: 0 for the epoch and shifted in the reply, the part's own kept.
  local slot = math.max(now + after, tat + (n - burst) * interval)
  if maxWait >= 0 and slot - now > maxWait then
    local left = math.floor(math.max(burst * interval - math.max(tat - now, 0), 0) / interval)
    return {0, slot - now - maxWait, left, 0, 0, 0}
  end
  -- gcra.book, then gcra.save: tat - now > 0 here, so never a DEL.
  local before = -1
  if tat >= slot then before = latest end
  local slack, gap = math.max(tat - slot, 0), math.max(slot - tat, 0)
  tat = math.max(tat, slot) + n * interval
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
  redis.call('SET', KEYS[2], struct.pack('<i8i8i8i8i8i8i8i8', seq, seq, epoch, shifted, tat, first, cut, gone) .. rest, 'PX', millis(tat - now))
  local left = math.floor(math.max(burst * interval - (tat - slot), 0) / interval)
  return {1, slot - now, left, 0, 0, slot, string.format('%d:%d:%d', seq, before, gap)} -- token(seq, before, gap)
end
