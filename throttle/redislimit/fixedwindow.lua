-- fixedwindow.lua: 'fw', as throttle/fixedwindow.go. Windows of length
-- window are aligned to the Unix epoch plus offset; each holds at most
-- limit units. A unit booked in the last tolerance of a window counts in
-- the next one too. State: cursor, the index of the latest window booked
-- into; count, its units; spill, the units of count booked in its last
-- tolerance, which also count in window cursor+1; last, the latest slot
-- booked.
local fixedWindow = {params = {'limit', 'window', 'offset', 'tolerance'}}

local function windowOf(p, at) return math.floor((at - p.offset) / p.window) end
local function windowStart(p, k) return k * p.window + p.offset end

-- inTail reports whether a unit at at also counts in the next window.
local function inTail(p, at)
  return p.tolerance > 0 and windowOf(p, at + p.tolerance) ~= windowOf(p, at)
end

-- used returns the units counted in window k.
local function used(p, k)
  local s = p.state
  if k == s.cursor then return s.count end
  if k == s.cursor + 1 then return s.spill end
  return 0
end

function fixedWindow.load(p) loadPacked(p, {'cursor', 'count', 'spill', 'last'}) end

function fixedWindow.save(p) savePacked(p, windowStart(p, p.state.cursor + 2) - now) end

function fixedWindow.earliest(p, at, n)
  at = math.max(at, p.state.last)
  local k = math.max(windowOf(p, at), p.state.cursor)
  at = math.max(at, windowStart(p, k))
  for _ = 1, 3 do
    if used(p, k) + n <= p.limit then return at end
    k = k + 1
    at = windowStart(p, k)
  end
  return at
end

function fixedWindow.remaining(p)
  local k = windowOf(p, now)
  if p.state.last > now or k < p.state.cursor then return 0 end
  return math.max(p.limit - used(p, k), 0)
end

function fixedWindow.ahead(p)
  local s = p.state
  if windowStart(p, s.cursor) > now then return s.count end
  if s.last > now then return 1 end -- at least the latest booking; the log is not kept
  return 0
end

function fixedWindow.book(p, slot, n)
  local s = p.state
  local k = windowOf(p, slot)
  local before = -1
  if k > s.cursor then
    s.count = n
    if k == s.cursor + 1 then s.count = s.spill + n end
    s.cursor, s.spill = k, 0
  else
    before = s.latest
    s.count = s.count + n
  end
  if inTail(p, slot) then s.spill = s.spill + n end
  s.last = math.max(s.last, slot)
  s.seq = s.seq + 1
  s.latest = s.seq
  return math.max(p.limit - s.count, 0), token(s.seq, before, s.cursor, slot)
end

-- give takes back the latest booking while its window is the cursor's:
-- its token is {seq, the booking before it, its window, its slot}.
function fixedWindow.give(p, tok, n)
  local s = p.state
  if s.latest ~= tok[1] or s.cursor ~= tok[3] then return false end
  s.count = math.max(s.count - n, 0)
  if tok[4] and inTail(p, tok[4]) then s.spill = math.max(s.spill - n, 0) end
  s.latest = tok[2]
  return true
end

function fixedWindow.shift(p, at, d)
  local s = p.state
  if s.last <= at then return end
  s.last = s.last + d
  local k = windowOf(p, s.last)
  if k > s.cursor then
    -- The shifted units may now fall in window k: count them all there.
    s.cursor = k
    if inTail(p, s.last) then s.spill = s.count else s.spill = 0 end
    s.latest = -1
  end
end

algorithms.fw = fixedWindow
