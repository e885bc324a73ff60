-- slidingwindowcounter.lua: 'swc', as throttle/slidingwindowcounter.go.
-- Windows of length window on a grid aligned to the epoch and moved
-- later by lag; the sliding window's count is estimated from the current
-- window's and the previous one's. A pause moves the key's grid with its
-- bookings, as if the key had been stopped for the pause. State: cursor,
-- the window of the latest booking; count, its units; previous, the
-- units of the window before it; floor, the latest slot booked; lag, how
-- far pauses have moved the grid.
defines.swc = function()
  local slidingCounter = {
    packed = packed({'cursor', 'count', 'previous', 'floor', 'lag'}),
    params = {'limit', 'window'},
  }

  -- mulDiv returns floor(x*y/w) and the remainder, exactly, for
  -- integers below 2^52: Lua's doubles hold x*y exactly only below 2^53,
  -- and a daily window of a billion units reaches 1e9 × 8.64e10 µs. Past
  -- that it adds x in y's binary digits, keeping the sum as q*w + r.
  local function mulDiv(x, y, w)
    if x * y < 4503599627370496 then -- 2^52
      local q = math.floor(x * y / w)
      return q, x * y - q * w
    end
    local xq, xr = math.floor(x / w), x % w
    local bits = {}
    while y > 0 do
      bits[#bits + 1] = y % 2
      y = math.floor(y / 2)
    end
    local q, r = 0, 0
    for i = #bits, 1, -1 do
      q, r = 2 * q, 2 * r
      if r >= w then q, r = q + 1, r - w end
      if bits[i] == 1 then
        q, r = q + xq, r + xr
        if r >= w then q, r = q + 1, r - w end
      end
    end
    return q, r
  end

  local function windowOf(p, at) return math.floor((at - p.state.lag) / p.window) end
  local function windowStart(p, k) return k * p.window + p.state.lag end

  -- counts returns the units of window k, not before the cursor's, and
  -- of the window before it.
  local function counts(p, k)
    local s = p.state
    if k == s.cursor then return s.count, s.previous end
    if k == s.cursor + 1 then return 0, s.count end
    return 0, 0
  end

  -- used returns the units in the window ending at at, rounded up:
  -- count + ceil(previous × (window-1-e) / window), e being how far at
  -- lies into its window.
  local function used(p, at)
    local k = math.max(windowOf(p, at), p.state.cursor)
    local c, prev = counts(p, k)
    local rest = p.window - 1 - math.max(at - windowStart(p, k), 0)
    local q, r = mulDiv(prev, rest, p.window)
    if r > 0 then q = q + 1 end
    return c + q
  end

  function slidingCounter.load(p) loadPacked(p, slidingCounter.packed) end

  function slidingCounter.save(p) savePacked(p, windowStart(p, p.state.cursor + 2) - now) end

  function slidingCounter.earliest(p, at, n)
    at = math.max(at, p.state.floor)
    local k = math.max(windowOf(p, at), p.state.cursor)
    while true do
      local c, prev = counts(p, k)
      local room = p.limit - n - c
      if room >= 0 then
        if prev <= room then return at end
        -- n fits e into window k when prev × (window-1-e) <= room × window.
        local e = p.window - 1 - mulDiv(room, p.window, prev)
        return math.max(at, windowStart(p, k) + e)
      end
      k = k + 1
      at = windowStart(p, k)
    end
  end

  function slidingCounter.remaining(p)
    if p.state.floor > now then return 0 end
    return math.max(p.limit - used(p, now), 0)
  end

  -- ahead is 1 while units are booked past now: the counters do not say
  -- how many.
  function slidingCounter.ahead(p)
    if p.state.floor > now then return 1 end
    return 0
  end

  function slidingCounter.book(p, slot, n)
    local s = p.state
    local k = windowOf(p, slot)
    local before = -1
    if k <= s.cursor then
      before = s.latest
      s.count = s.count + n
    elseif k == s.cursor + 1 then
      s.cursor, s.previous, s.count = k, s.count, n
    else
      s.cursor, s.previous, s.count = k, 0, n
    end
    s.floor = slot
    s.seq = s.seq + 1
    s.latest = s.seq
    return math.max(p.limit - used(p, slot), 0), token(s.seq, before, s.cursor)
  end

  -- give takes back the latest booking while its window is the cursor's:
  -- its token is {seq, the booking before it, its window}.
  function slidingCounter.give(p, tok, n)
    local s = p.state
    if s.latest ~= tok[1] or s.cursor ~= tok[3] then return false end
    s.count = math.max(s.count - n, 0)
    s.latest = tok[2]
    return true
  end

  -- settle adjusts the count of the booking's window while the counters
  -- hold it, the cursor's or the one before, as
  -- throttle/slidingwindowcounter.go. An excess in a window after the
  -- cursor's (a state that had forgotten the booking) counts there like a
  -- booking.
  function slidingCounter.settle(p, tok, n, delta, slot, stale)
    if delta < 0 and stale then return end
    local s = p.state
    local k = windowOf(p, slot)
    if k == s.cursor then
      s.count = math.max(s.count + delta, 0)
    elseif k == s.cursor - 1 then
      s.previous = math.max(s.previous + delta, 0)
    elseif k == s.cursor + 1 and delta > 0 then
      s.cursor, s.previous, s.count = k, s.count, delta
    elseif k > s.cursor + 1 and delta > 0 then
      s.cursor, s.previous, s.count = k, 0, delta
    end
  end

  -- shift moves the key's grid, and every unit counted on it, later by d.
  function slidingCounter.shift(p, at, d)
    local s = p.state
    s.lag = s.lag + d
    s.floor = s.floor + d
  end

  return slidingCounter
end
