-- settle.lua: settles, as throttle's Reservation.Settle: each part of a
-- booking charges or gives back the difference between what the call
-- really cost and what was booked, at the booking's own slot and window,
-- never at now. A process queues its settles and sends them with the
-- key's next script call, whatever its op, or on their own (op
-- 'settle'); they are applied before the op.
--
-- A settle is one argument, its fields separated by spaces:
--   id epoch shifted slot  then, per part, token n actual
-- id names the settle (unique per process and booking); epoch, shifted
-- and slot are the booking's, as cancel takes them (pause.moved finds
-- where it lies now); token is the part's
-- booking token ('-' for a part that booked nothing), n the units it
-- booked and actual what the call cost.
--
-- Applied once: the ids of the settles applied in the last settleMemory
-- are kept in a sorted set at the last key, KEYS[#KEYS] (the budget's
-- hash tag, then ':settled'), scored by when they were applied; one
-- found there is skipped. So a settle that go-redis resends, or that a
-- process sends again after a failed call, is applied once.
--
-- A part's state is stale when it is not the state the booking was made
-- in: the key was dropped (expired, evicted or flushed) and made anew,
-- or its pause state was. A stale part is charged, as a new booking at
-- the slot would be, and gives nothing back.
local settle = {}

-- settleMemory is how long (µs) an applied settle's id is kept: far
-- longer than go-redis takes to resend a call, and than a short outage,
-- after which the process sends again the settles whose reply it lost.
-- A key settled a thousand times a second keeps 60 000 ids (a few MB).
-- settle.go has the same settleMemory: a process sends a settle as it is
-- for resendFor, 10 s less, and its charges alone after that.
local settleMemory = 60 * 1000000

-- farCharge (µs, about 35 years) bounds how far a settle's excess moves
-- a bucket's tat, and farUnits the units it adds to a window: an actual
-- far beyond any capacity (bad input, but the call has happened) is
-- charged that far, as throttle's settle does. Past 2^53 a number is not
-- exact, and past 2^63 it does not pack: the state was lost, or the call
-- carrying the settle failed.
local farCharge, farUnits = 2 ^ 50, 2 ^ 40

-- excess bounds a settle's excess delta on part p.
local function excess(p, delta)
  if delta <= 0 then return delta end
  if p.interval then return math.min(delta, math.max(math.floor(farCharge / (p.interval + 1)), 1)) end
  return math.min(delta, farUnits)
end

-- one applies the settle in ARGV text to parts.
local function one(P, parts, text)
  local f = {}
  for v in string.gmatch(text, '%S+') do f[#f + 1] = v end
  local id, epoch, shifted, slot = f[1], tonumber(f[2]), tonumber(f[3]), tonumber(f[4])
  if not slot or #f ~= 4 + 3 * #parts then error('redislimit: malformed settle: ' .. text) end
  local stale = false
  if P.epoch ~= 0 and (epoch == P.epoch or epoch == 0) then
    if epoch == 0 then shifted = 0 end
    slot = pause.moved(P, slot, shifted)
  elseif P.epoch ~= 0 then
    stale = true -- the pause state was made anew: the key was dropped
  end
  for i, p in ipairs(parts) do
    local j = 5 + 3 * (i - 1)
    local n, actual = tonumber(f[j + 1]), tonumber(f[j + 2])
    if actual ~= n then
      algorithms[p.algo].settle(p, tokens(f[j]), n, excess(p, actual - n), slot, stale or p.new, id)
      if p.interval and actual > n and p.state.tat > now + farCharge then
        p.state.tat, p.state.owe = now + farCharge, 0 -- charges again and again
      end
      p.settled = true
      if actual > n then p.new = false end -- an excess makes the state
    end
  end
end

-- all applies the settles ARGV[first..last] to parts, each once, keeping
-- their ids at key.
function settle.all(P, parts, first, last, key)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now - settleMemory))
  for a = first, last do
    local id = string.match(ARGV[a], '^%S+')
    if redis.call('ZADD', key, 'NX', fmt(now), id) == 1 then one(P, parts, ARGV[a]) end
  end
  redis.call('PEXPIRE', key, millis(settleMemory))
end
