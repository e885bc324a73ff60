-- gcra.lua: the token bucket ('tb') and the leaky bucket ('lb'), both
-- GCRA as in throttle/gcra.go. State: tat, the theoretical arrival time:
-- the bucket is full once now reaches it. Parameters: interval and sub,
-- the spacing of units, interval µs and sub ns (sub is 0 when the bucket's
-- span is too long for nanoseconds to stay exact in doubles; the interval
-- is then rounded up to whole µs); burst, how many may go at once (a
-- leaky bucket's capacity plus one). tat is kept in whole µs, rounded up,
-- and owe, the ns it lies past the exact one (0 to 999), so that units of
-- a fraction of a µs add up exactly: slots are rounded up, never down.
--
-- What a settle may give back, as throttle/gcra.go keeps it: first, the
-- seq the state started at (the server's time when it was made, so that
-- a booking of a state since dropped has a seq no later than it: a
-- stale one); cut, the booking from which the current run of slack
-- starts (bookings before it give back nothing); gone, all that settles
-- have given back (µs of tat, rounded up); owe, as above. Past the packed fields, the slack of the
-- run's bookings as (seq, level) pairs, '<i8i8' each, oldest first, at
-- most maxSlack, with levels rising: the hot path reads them only to
-- push one (see pushSlack).
defines.tb = function()
  local gcra = {packed = packed({'tat', 'first', 'cut', 'gone', 'owe'}), params = {'interval', 'sub', 'burst'}}

  -- maxSlack bounds the slack entries a key keeps, as in process.
  local maxSlack = 64

  function gcra.load(p)
    loadPacked(p, gcra.packed)
    if p.new then
      local s = p.state
      s.seq, s.first, s.cut = now, now, now
    end
  end

  function gcra.save(p) savePacked(p, p.state.tat - now) end

  -- move moves the exact tat by us µs and ns ns.
  local function move(p, us, ns)
    local s = p.state
    local x = ns - s.owe
    local q = ceilDiv(x, 1000)
    s.tat, s.owe = s.tat + us + q, q * 1000 - x
  end

  -- advance sets tat to max(tat, slot) plus k units.
  local function advance(p, slot, k)
    local s = p.state
    if slot >= s.tat then s.tat, s.owe = slot, 0 end
    move(p, k * p.interval, k * p.sub)
  end

  -- slackAt returns how far the exact tat lies past slot, in whole µs
  -- rounded down.
  local function slackAt(p, slot)
    local s = p.state
    local slack = s.tat - slot
    if s.owe > 0 then slack = slack - 1 end
    return math.max(slack, 0)
  end

  function gcra.earliest(p, at, n)
    local s = p.state
    return math.max(at, s.tat + (n - p.burst) * p.interval + ceilDiv((n - p.burst) * p.sub - s.owe, 1000))
  end

  -- behind returns the span the exact tat lies past at, in whole units
  -- rounded up.
  local function behind(p, at)
    local s = p.state
    if s.tat <= at then return 0 end
    if p.sub == 0 then return ceilDiv(s.tat - at, p.interval) end
    return math.max(ceilDiv((s.tat - at) * 1000 - s.owe, p.interval * 1000 + p.sub), 0)
  end

  -- left returns the units left in the bucket at the given time.
  local function gcraLeft(p, at)
    return math.max(p.burst - behind(p, at), 0)
  end

  function gcra.remaining(p) return gcraLeft(p, now) end

  -- ahead reports the span booked past now in whole units, rounded up.
  function gcra.ahead(p) return behind(p, now) end

  gcra.advance, gcra.slackAt = advance, slackAt -- for a lease (slotlease.lua)

  -- pushSlack records the slack of booking seq (how far tat lay past its
  -- slot): 0 starts a new run; otherwise its level (slack + gone) goes
  -- last, after dropping the entries at as high a level or higher, which
  -- say nothing more for the bookings before them. Past maxSlack the
  -- oldest goes, and the bookings up to it give back nothing.
  local function pushSlack(p, seq, slack)
    local s = p.state
    if slack <= 0 then
      s.cut, p.rest = seq, ''
      return
    end
    local level = slack + s.gone
    local r = p.rest
    while #r >= 16 do
      local _, l = struct.unpack('<i8i8', r, #r - 15)
      if l < level then break end
      r = string.sub(r, 1, #r - 16)
    end
    if #r >= 16 * maxSlack then
      s.cut = math.max(s.cut, (struct.unpack('<i8', r)))
      r = string.sub(r, 17)
    end
    p.rest = r .. struct.pack('<i8i8', seq, level)
  end

  gcra.pushSlack = pushSlack -- for a lease's block (slotlease.lua)

  -- slackAfter returns the least slack of the bookings after seq, or -1
  -- when none is on record.
  local function slackAfter(p, seq)
    local s = p.state
    if seq < s.cut then return 0 end
    local least = -1
    for i = 1, #p.rest - 15, 16 do
      local e, l = struct.unpack('<i8i8', p.rest, i)
      if e > seq and (least < 0 or l < least) then least = l end
    end
    if least < 0 then return -1 end
    return math.max(least - s.gone, 0)
  end

  function gcra.book(p, slot, n)
    local s = p.state
    local before = -1 -- the booking this one follows, if it may still be cancelled
    if s.tat >= slot then before = s.latest end
    local slack = slackAt(p, slot)
    local gap, owed = 0, 0 -- idle before the slot: gap µs and owed ns
    if slot >= s.tat then gap, owed = slot - s.tat, s.owe end
    advance(p, slot, n)
    s.seq = s.seq + 1
    s.latest = s.seq
    pushSlack(p, s.seq, slack)
    return gcraLeft(p, slot), token(s.seq, before, gap, owed)
  end

  -- give takes the units back only from the latest booking, and the idle
  -- stretch its slot left before it (as in process, tat goes back to
  -- where it was, plus what settles changed since): its token is {seq,
  -- the booking before it, that stretch in µs and ns}.
  function gcra.give(p, tok, n)
    local s = p.state
    if s.latest ~= tok[1] then return false end
    move(p, -n * p.interval - (tok[3] or 0), -n * p.sub - (tok[4] or 0))
    s.latest = tok[2]
    return true
  end

  -- settle, as throttle/gcra.go: an excess moves tat later by its cost
  -- (a part that booked nothing is booked now, at its slot); a give-back
  -- moves tat earlier by its cost, in full for the latest booking, and
  -- otherwise no further than the least slack of the bookings after it.
  -- A stale booking (of a state since dropped) gives nothing back; its
  -- excess moves tat later all the same, which is never less than exact
  -- (every booking of the dropped state lay before the new one's first),
  -- or, with no state at all, is charged from now.
  function gcra.settle(p, tok, n, delta, slot, stale)
    local s = p.state
    stale = stale or (tok and tok[1] <= s.first)
    if delta > 0 and stale and p.new then
      s.tat, s.owe = now, 0 -- nothing on record: the dropped tat lay no later than now
      move(p, delta * p.interval, delta * p.sub)
    elseif delta > 0 and not tok and not stale then
      s.seq = s.seq + 1
      s.latest = -1 -- units lie after the latest booking's now
      local slack = slackAt(p, slot)
      advance(p, slot, delta)
      pushSlack(p, s.seq, slack)
    elseif delta > 0 then
      move(p, delta * p.interval, delta * p.sub)
    elseif not stale and tok then
      local us, ns = delta * p.interval, delta * p.sub -- what goes back, negated
      if tok[1] ~= s.seq and tok[1] ~= s.latest then -- not the latest one standing
        local least = slackAfter(p, tok[1])
        local over = least < -us -- the slack after it is less than what goes back
        if p.sub ~= 0 then over = least * 1000 < -(us * 1000 + ns) end
        if least >= 0 and over then us, ns = -least, 0 end
      end
      move(p, us, ns)
      s.gone = s.gone - us + ceilDiv(-ns, 1000)
    end
  end

  function gcra.shift(p, at, d)
    local s = p.state
    if s.tat < at then s.latest = -1 end
    if at >= s.tat then s.tat, s.owe = at, 0 end
    s.tat = s.tat + d
  end
  return gcra
end
defines.lb = defines.tb
