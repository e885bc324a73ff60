-- fixedwindow.lua: 'fw', as throttle/fixedwindow.go, by the rule both
-- share: at most limit units land, by their actual due time (pauses
-- included), in any window of length window aligned to the Unix epoch
-- plus offset. A unit in the last tolerance of a window counts in the
-- next one too. A window with room takes its first unit at its reset.
--
-- State, packed: seq, latest, epoch and shifted as every part (see
-- state.lua), then
--   cursor  the window of the latest booking
--   count   units counted in window cursor
--   spill   units of count in its last tolerance, which count in
--           window cursor+1 too
--   floor   the latest slot booked; no slot goes below it
-- then one triple (slot, n, seq) per booking still ahead, oldest first,
-- slot being where it is due now, pauses included. A pause moves the
-- bookings ahead later, and then lays them out again in order, each at
-- the start of the first window with room for it when the window it
-- lands in is full; every booking after a pushed one moves at least as
-- far, so spacing is kept.
defines.fw = function()
  local fixedWindow = {params = {'limit', 'window', 'offset', 'tolerance'}}
  local fixed = {'seq', 'latest', 'epoch', 'shifted', 'cursor', 'count', 'spill', 'floor'}

  local function windowOf(p, at) return math.floor((at - p.offset) / p.window) end
  local function windowStart(p, k) return k * p.window + p.offset end

  -- inTail reports whether a unit at at also counts in the next window.
  local function inTail(p, at)
    return p.tolerance > 0 and windowOf(p, at + p.tolerance) ~= windowOf(p, at)
  end

  -- used returns the units counted in window k, not before the cursor's.
  local function used(p, k)
    local s = p.state
    if k == s.cursor then return s.count end
    if k == s.cursor + 1 then return s.spill end
    return 0
  end

  -- countAt counts n units at at, not before the cursor's window, and
  -- moves the cursor there.
  local function countAt(p, at, n)
    local s = p.state
    local k = windowOf(p, at)
    if k == s.cursor then
      s.count = s.count + n
    elseif k == s.cursor + 1 then
      s.cursor, s.count, s.spill = k, s.spill + n, 0
    else
      s.cursor, s.count, s.spill = k, n, 0
    end
    if inTail(p, at) then s.spill = s.spill + n end
  end

  -- dropDue forgets the bookings ahead that are due by at.
  local function dropDue(p, at)
    local ahead, keep = p.ahead, {}
    for _, b in ipairs(ahead) do
      if b.slot > at then keep[#keep + 1] = b end
    end
    p.ahead = keep
  end

  function fixedWindow.load(p)
    local raw = redis.call('GET', p.key)
    p.new = not raw
    p.state, p.ahead = {latest = -1}, {}
    for _, f in ipairs(fixed) do p.state[f] = p.state[f] or 0 end
    if not raw then return end
    local k = (#raw / 8 - #fixed) / 3
    local v = {struct.unpack('<' .. string.rep('i8', #fixed + 3 * k), raw)}
    for i, f in ipairs(fixed) do p.state[f] = v[i] end
    for i = 1, k do
      local j = #fixed + 3 * (i - 1)
      p.ahead[i] = {slot = v[j + 1], n = v[j + 2], seq = v[j + 3]}
    end
  end

  function fixedWindow.save(p)
    local s = p.state
    local ttl = windowStart(p, s.cursor + 2) - now
    if ttl <= 0 then
      redis.call('DEL', p.key)
      return
    end
    local v = {}
    for i, f in ipairs(fixed) do v[i] = s[f] end
    for _, b in ipairs(p.ahead) do
      v[#v + 1], v[#v + 2], v[#v + 3] = b.slot, b.n, b.seq
    end
    redis.call('SET', p.key, struct.pack('<' .. string.rep('i8', #v), unpack(v)), 'PX', millis(ttl))
  end

  function fixedWindow.earliest(p, at, n)
    at = math.max(at, p.state.floor)
    local k = math.max(windowOf(p, at), p.state.cursor)
    at = math.max(at, windowStart(p, k))
    while used(p, k) + n > p.limit do
      k = k + 1
      at = windowStart(p, k)
    end
    return at
  end

  function fixedWindow.remaining(p)
    local k = windowOf(p, now)
    if p.state.floor > now or k < p.state.cursor then return 0 end
    return math.max(p.limit - used(p, k), 0)
  end

  function fixedWindow.ahead(p)
    local n = 0
    for _, b in ipairs(p.ahead) do
      if b.slot > now then n = n + b.n end
    end
    return n
  end

  function fixedWindow.book(p, slot, n)
    local s = p.state
    local before = -1
    if windowOf(p, slot) == s.cursor then before = s.latest end
    countAt(p, slot, n)
    s.floor = slot
    s.seq = s.seq + 1
    s.latest = s.seq
    dropDue(p, now)
    if slot > now then p.ahead[#p.ahead + 1] = {slot = slot, n = n, seq = s.seq} end
    return math.max(p.limit - s.count, 0), token(s.seq, before, s.cursor, slot)
  end

  -- give gives a booking back. Its token is {seq, the booking before it,
  -- its window, its slot}. One still ahead leaves the list, and its units
  -- leave the count while they lie in the cursor's window; one already
  -- due comes back only while it is the latest in the cursor's window.
  -- Either way a resent cancel finds nothing to give.
  function fixedWindow.give(p, tok, n)
    local s = p.state
    for i, b in ipairs(p.ahead) do
      if b.seq == tok[1] then
        table.remove(p.ahead, i)
        if windowOf(p, b.slot) == s.cursor then
          s.count = math.max(s.count - n, 0)
          if inTail(p, b.slot) then s.spill = math.max(s.spill - n, 0) end
        end
        if s.latest == tok[1] then s.latest = tok[2] end
        return true
      end
    end
    if s.latest ~= tok[1] or s.cursor ~= tok[3] then return false end
    s.count = math.max(s.count - n, 0)
    if inTail(p, tok[4]) then s.spill = math.max(s.spill - n, 0) end
    s.latest = tok[2]
    return true
  end

  -- settle charges or gives back delta units of a booking of n at slot,
  -- as throttle/fixedwindow.go: a booking still ahead carries the change
  -- (no more than a window's limit), and the window the booking lies in
  -- counts it while it is the cursor's; an excess in a later window moves
  -- the cursor there, and one in the last tolerance of the window before
  -- the cursor's counts in the cursor's.
  function fixedWindow.settle(p, tok, n, delta, slot, stale)
    local s = p.state
    if tok and not stale then
      for _, b in ipairs(p.ahead) do
        if b.seq == tok[1] and b.n == n then
          slot = b.slot -- where it is due now, pushes included
          b.n = math.min(math.max(b.n + delta, 0), p.limit)
          break
        end
      end
    end
    local k = windowOf(p, slot)
    if delta > 0 and k >= s.cursor then
      countAt(p, slot, delta)
    elseif delta < 0 and k == s.cursor and not stale then
      local back = math.min(-delta, s.count)
      s.count = s.count - back
      if inTail(p, slot) then s.spill = s.spill - math.min(back, s.spill) end
    elseif delta > 0 and k == s.cursor - 1 and inTail(p, slot) then
      s.count = s.count + delta
    end
  end

  -- shift moves the bookings ahead of at later by d, then lays them out
  -- again so that no window holds more than limit. It returns the pushes
  -- beyond d, as {seq, extra} steps: every booking from seq on moved
  -- extra further, until the next step.
  function fixedWindow.shift(p, at, d)
    local s = p.state
    dropDue(p, at)
    if s.floor <= at then return {} end
    s.floor = s.floor + d
    if #p.ahead == 0 then return {} end
    -- The window of at may hold units already due; the windows after it
    -- hold only units ahead, but for the part of its units in its last
    -- tolerance. When the cursor has left at's window, take that window
    -- as full: no unit ahead moves into it.
    local w = windowOf(p, at)
    local inW, tailW = 0, 0
    for _, b in ipairs(p.ahead) do
      if windowOf(p, b.slot) ~= w then break end
      inW = inW + b.n
      if inTail(p, b.slot) then tailW = tailW + b.n end
    end
    local dueW, dueSpill = p.limit - inW, 0
    if inTail(p, at) then dueSpill = dueW end
    if s.cursor == w then dueW, dueSpill = s.count - inW, s.spill - tailW end
    s.cursor, s.count, s.spill = w, dueW, dueSpill
    local extra, steps = 0, {}
    for _, b in ipairs(p.ahead) do
      local t = b.slot + d + extra
      local k = windowOf(p, t)
      while used(p, k) + b.n > p.limit do
        k = k + 1
        t = windowStart(p, k)
      end
      if t - (b.slot + d) > extra then
        extra = t - (b.slot + d)
        steps[#steps + 1] = {b.seq, extra}
      end
      b.slot = t
      countAt(p, t, b.n)
    end
    s.floor = math.max(s.floor, p.ahead[#p.ahead].slot)
    s.latest = -1
    return steps
  end

  return fixedWindow
end
