-- slidingwindowcounter.lua: 'swc', as throttle/slidingwindowcounter.go.
-- Windows of length window aligned to the epoch; the sliding window's
-- count is estimated from the current window's and the previous one's.
-- State: cursor, the index of the latest window booked into; count, its
-- units; previous, the units of the window before it; last, the latest
-- slot booked.
defines.swc = function()
  local slidingCounter = {packed = packed({'cursor', 'count', 'previous', 'last'}), params = {'limit', 'window'}}

  -- counts returns the units of window k and of the window before it.
  local function counts(p, k)
    local s = p.state
    if k == s.cursor then return s.count, s.previous end
    if k == s.cursor + 1 then return 0, s.count end
    return 0, 0
  end

  -- estimate returns the units in the window ending at at, rounded up:
  -- count + ceil(previous × (window-1-e) / window), e being how far at lies
  -- into its window.
  local function estimate(p, at)
    local k = math.floor(at / p.window)
    if k < p.state.cursor then return p.limit end
    local c, prev = counts(p, k)
    return c + math.ceil(prev * (p.window - 1 - (at - k * p.window)) / p.window)
  end

  function slidingCounter.load(p) loadPacked(p, slidingCounter.packed) end

  function slidingCounter.save(p) savePacked(p, (p.state.cursor + 2) * p.window - now) end

  function slidingCounter.earliest(p, at, n)
    at = math.max(at, p.state.last)
    for _ = 1, 4 do
      local k = math.floor(at / p.window)
      local c, prev = counts(p, k)
      local room = p.limit - n - c
      if room >= 0 then
        if prev == 0 then return at end
        -- n fits e into window k when prev × (window-1-e) <= room × window.
        local e = p.window - 1 - math.floor(room * p.window / prev)
        return math.max(at, k * p.window + e)
      end
      at = (k + 1) * p.window
    end
    return at
  end

  function slidingCounter.remaining(p)
    if p.state.last > now then return 0 end
    return math.max(p.limit - estimate(p, now), 0)
  end

  function slidingCounter.ahead(p)
    local s = p.state
    if s.cursor * p.window > now then return s.count end
    if s.last > now then return 1 end
    return 0
  end

  function slidingCounter.book(p, slot, n)
    local s = p.state
    local k = math.floor(slot / p.window)
    local before = -1
    if k > s.cursor then
      if k == s.cursor + 1 then s.previous = s.count else s.previous = 0 end
      s.cursor, s.count = k, n
    else
      before = s.latest
      s.count = s.count + n
    end
    s.last = math.max(s.last, slot)
    s.seq = s.seq + 1
    s.latest = s.seq
    return math.max(p.limit - estimate(p, slot), 0), token(s.seq, before, s.cursor)
  end

  -- give takes back the latest booking while its window is the cursor's.
  function slidingCounter.give(p, tok, n)
    local s = p.state
    if s.latest ~= tok[1] or s.cursor ~= tok[3] then return false end
    s.count = math.max(s.count - n, 0)
    s.latest = tok[2]
    return true
  end

  function slidingCounter.shift(p, at, d)
    local s = p.state
    if s.last <= at then return end
    s.last = s.last + d
    local k = math.floor(s.last / p.window)
    if k > s.cursor then
      -- Count the shifted units in window k and in the one before it.
      s.cursor, s.previous = k, s.count
      s.latest = -1
    end
  end
  return slidingCounter
end
