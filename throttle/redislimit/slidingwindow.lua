-- slidingwindow.lua: 'sl', the exact sliding log, as
-- throttle/slidingwindow.go: a sorted set of slots, one member per unit
-- ("seq:i"; a settle's excess is "id+i"), at most limit in any window of
-- length window. Its own numbers live in members with negative scores
-- (-(v+1)): #seq, #epoch and #shifted, as in a packed part, and #floor,
-- the latest slot booked: no slot goes below it, even once a settle or
-- cancel took the latest units out. redis-cli reads it with
-- ZRANGE <key> 0 -1 WITHSCORES.
defines.sl = function()
  local slidingLog = {params = {'limit', 'window'}}
  local counters = 4 -- members before the first slot

  local function encode(v) return -(v + 1) end
  local function decode(v) return -tonumber(v) - 1 end

  function slidingLog.load(p)
    local v = redis.call('ZMSCORE', p.key, '#seq', '#epoch', '#shifted', '#floor')
    p.new = not v[1]
    p.state = {seq = 0, epoch = 0, shifted = 0, floor = 0}
    if not p.new then
      p.state.seq, p.state.epoch, p.state.shifted, p.state.floor = decode(v[1]), decode(v[2]), decode(v[3]), v[4] and decode(v[4]) or 0
    end
    redis.call('ZREMRANGEBYSCORE', p.key, 0, now - p.window)
    p.units = redis.call('ZCOUNT', p.key, 0, '+inf')
    p.last = 0
    if p.units > 0 then
      local top = redis.call('ZRANGE', p.key, -1, -1, 'WITHSCORES')
      p.last = tonumber(top[2])
    end
  end

  function slidingLog.save(p)
    local s = p.state
    redis.call('ZADD', p.key, encode(s.seq), '#seq', encode(s.epoch), '#epoch', encode(s.shifted), '#shifted', encode(s.floor), '#floor')
    local ttl = math.max(p.last, s.floor) + p.window - now
    if ttl <= 0 then
      redis.call('DEL', p.key)
    else
      redis.call('PEXPIRE', p.key, millis(ttl))
    end
  end

  function slidingLog.earliest(p, at, n)
    at = math.max(at, p.last, p.state.floor)
    if p.units + n <= p.limit then return at end
    -- The unit that must leave the window first.
    local r = counters + p.units - p.limit + n - 1
    local e = redis.call('ZRANGE', p.key, r, r, 'WITHSCORES')
    return math.max(at, tonumber(e[2]) + p.window)
  end

  function slidingLog.remaining(p)
    return math.max(p.limit - redis.call('ZCOUNT', p.key, '(' .. fmt(now - p.window), '+inf'), 0)
  end

  function slidingLog.ahead(p)
    return redis.call('ZCOUNT', p.key, '(' .. fmt(now), '+inf')
  end

  -- members calls f with up to 1000 members of booking seq at a time.
  local function members(seq, n, f, withSlot)
    local i = 1
    while i <= n do
      local args = {}
      for j = i, math.min(n, i + 999) do
        if withSlot then args[#args + 1] = withSlot end
        args[#args + 1] = fmt(seq) .. ':' .. fmt(j)
      end
      f(args)
      i = i + 1000
    end
  end

  -- trim keeps the log's work bounded, as in process: after a booking it
  -- drops the units of a slot once limit units follow at later slots
  -- (they span the window then, so they can no longer hold a slot back).
  -- A settle's excess does not trim: its units may be denser than that.
  local function trim(p)
    if p.units <= p.limit then return end
    local r = counters + p.units - p.limit
    local e = redis.call('ZRANGE', p.key, r, r, 'WITHSCORES')
    p.units = p.units - redis.call('ZREMRANGEBYSCORE', p.key, 0, '(' .. e[2])
  end

  function slidingLog.book(p, slot, n)
    local s = p.state
    s.seq = s.seq + 1
    members(s.seq, n, function(args) redis.call('ZADD', p.key, unpack(args)) end, fmt(slot))
    p.units, p.last = p.units + n, slot
    s.floor = math.max(s.floor, slot)
    trim(p)
    local used = redis.call('ZCOUNT', p.key, '(' .. fmt(slot - p.window), '+inf')
    return math.max(p.limit - used, 0), token(s.seq)
  end

  -- give takes back whatever units of the booking are still in the log.
  function slidingLog.give(p, tok, n)
    local gone = 0
    members(tok[1], n, function(args) gone = gone + redis.call('ZREM', p.key, unpack(args)) end)
    if gone > 0 and p.units > gone then
      local top = redis.call('ZRANGE', p.key, -1, -1, 'WITHSCORES')
      p.last = tonumber(top[2])
    end
    p.units = p.units - gone
    return gone > 0
  end

  -- settle removes the booking's last units from the log, those still
  -- in it at the booking's slot, or adds the excess there (named by the
  -- settle's id, at most limit of them: more say nothing more), as
  -- throttle/slidingwindow.go. The log then holds what was really used.
  -- slot is where the booking is due now; a unit a pause found already
  -- due stayed where it was, so a unit of the booking lies between its
  -- slot as booked and slot.
  function slidingLog.settle(p, tok, n, delta, slot, stale, id)
    if delta < 0 then
      if stale or not tok then return end
      local gone = 0
      members(tok[1], n, function(args)
        local scores = redis.call('ZMSCORE', p.key, unpack(args))
        local drop = {}
        for i, sc in ipairs(scores) do
          local j = tonumber(string.match(args[i], ':(%d+)$'))
          if sc and j > n + delta and tonumber(sc) <= slot then drop[#drop + 1] = args[i] end
        end
        if #drop > 0 then gone = gone + redis.call('ZREM', p.key, unpack(drop)) end
      end)
      p.units = p.units - gone
      if gone > 0 and p.units > 0 then
        local top = redis.call('ZRANGE', p.key, -1, -1, 'WITHSCORES')
        p.last = tonumber(top[2])
      end
      return
    end
    local at = slot
    if tok and not stale then
      local sc = redis.call('ZSCORE', p.key, fmt(tok[1]) .. ':1')
      if sc then at = tonumber(sc) end
    end
    local add = math.min(delta, p.limit)
    local i = 1
    while i <= add do
      local args = {}
      for j = i, math.min(add, i + 999) do
        args[#args + 1] = fmt(at)
        args[#args + 1] = id .. '+' .. fmt(j)
      end
      redis.call('ZADD', p.key, unpack(args))
      i = i + 1000
    end
    p.units = p.units + add
    p.last = math.max(p.last, at)
  end

  function slidingLog.shift(p, at, d)
    local later = redis.call('ZRANGEBYSCORE', p.key, '(' .. fmt(at), '+inf', 'WITHSCORES')
    for i = 1, #later, 2 do
      redis.call('ZADD', p.key, fmt(tonumber(later[i + 1]) + d), later[i])
    end
    if p.last > at then p.last = p.last + d end
    if p.state.floor > at then p.state.floor = p.state.floor + d end
  end
  return slidingLog
end
