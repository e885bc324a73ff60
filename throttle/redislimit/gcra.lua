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
