-- gcra.lua: the token bucket ('tb') and the leaky bucket ('lb'), both
-- GCRA as in throttle/gcra.go. State: tat, the theoretical arrival time:
-- the bucket is full once now reaches it. Parameters: interval, the
-- spacing of units; burst, how many may go at once (a leaky bucket's
-- capacity plus one).
defines.tb = function()
  local gcra = {packed = packed({'tat'}), params = {'interval', 'burst'}}

  function gcra.load(p) loadPacked(p, gcra.packed) end

  function gcra.save(p) savePacked(p, p.state.tat - now) end

  function gcra.earliest(p, at, n)
    return math.max(at, p.state.tat + (n - p.burst) * p.interval)
  end

  -- left returns the units left in the bucket at the given time.
  local function gcraLeft(p, at)
    return math.floor(math.max(p.burst * p.interval - math.max(p.state.tat - at, 0), 0) / p.interval)
  end

  function gcra.remaining(p) return gcraLeft(p, now) end

  -- ahead reports the span booked past now in whole units, rounded up.
  function gcra.ahead(p)
    return math.ceil(math.max(p.state.tat - now, 0) / p.interval)
  end

  function gcra.book(p, slot, n)
    local s = p.state
    local before = -1 -- the booking this one follows, if it may still be cancelled
    if s.tat >= slot then before = s.latest end
    s.tat = math.max(s.tat, slot) + n * p.interval
    s.seq = s.seq + 1
    s.latest = s.seq
    return gcraLeft(p, slot), token(s.seq, before)
  end

  -- give takes the units back only from the latest booking: its token is
  -- {seq, the booking before it}.
  function gcra.give(p, tok, n)
    local s = p.state
    if s.latest ~= tok[1] then return false end
    s.tat = s.tat - n * p.interval
    s.latest = tok[2]
    return true
  end

  function gcra.shift(p, at, d)
    local s = p.state
    if s.tat < at then s.latest = -1 end
    s.tat = math.max(s.tat, at) + d
  end
  return gcra
end
defines.lb = defines.tb

-- The bucket fast path: budget.lua's reserve on a key with one token or
-- leaky bucket and no pause state, the common case, unrolled. It reads
-- the pause state with one EXISTS instead of HMGET, builds no tables or
-- closures, and gives the same reply and leaves the same state as the
-- general path to the bit: TestBucketFastPath compares the two step by
-- step. A pause state, once made, sends the key down the general path
-- until it expires. The packed state is gcra's: seq, latest, epoch,
-- shifted, tat (see state.lua).
-- Speed only: Redis decisions/s ≥ 0.9× redis_rate, bench/micro
-- RedisDecision; the general path alone reaches 0.67×.
if fast and ARGV[1] == 'reserve' and ARGV[3] == '1' and (ARGV[4] == 'tb' or ARGV[4] == 'lb')
    and redis.call('EXISTS', KEYS[1]) == 0 then
  local interval, burst = tonumber(ARGV[5]), tonumber(ARGV[6])
  local n, maxWait, after = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
  local seq, latest, epoch, shifted, tat = 0, -1, 0, 0, 0
  local raw = redis.call('GET', KEYS[2])
  if raw then seq, latest, epoch, shifted, tat = struct.unpack('<i8i8i8i8i8', raw) end
  -- gcra.earliest from now+after; then as budget.lua's reserve, with no
  -- pause: epoch and shifted 0 in the reply, the part's own kept.
  local slot = math.max(now + after, tat + (n - burst) * interval)
  if maxWait >= 0 and slot - now > maxWait then
    local left = math.floor(math.max(burst * interval - math.max(tat - now, 0), 0) / interval)
    return {0, slot - now - maxWait, left, 0, 0, 0}
  end
  -- gcra.book, then gcra.save: tat - now > 0 here, so never a DEL.
  local before = -1
  if tat >= slot then before = latest end
  tat = math.max(tat, slot) + n * interval
  seq = seq + 1
  redis.call('SET', KEYS[2], struct.pack('<i8i8i8i8i8', seq, seq, epoch, shifted, tat), 'PX', millis(tat - now))
  local left = math.floor(math.max(burst * interval - (tat - slot), 0) / interval)
  return {1, slot - now, left, 0, 0, slot, token(seq, before)}
end
