-- budget.lua closes the budget script: it reads the parts and runs the op.
--
-- KEYS[1] is the key's pause state, KEYS[2..] its parts' state, one per
-- limit on the key, all under one hash tag.
--
-- ARGV: op ('reserve', 'parts', 'cancel', 'settle', 'pause' or
-- 'inspect'), the frozen time (see now.lua), the number of parts, then
-- for each part its algorithm and that algorithm's params, then the op's
-- own arguments, then, for a budget that follows the upstream, its
-- statements (stated.lua), then any settles riding along (settle.lua),
-- then the pause channel. KEYS has one more key after the parts' for
-- each: the key's record of what the upstream stated, then the key's
-- record of settles applied (the last key).
local op = ARGV[1]
local parts = {}
local argc = 4
for i = 1, tonumber(ARGV[3]) do
  local algo = ARGV[argc]
  local a = algorithms[algo]
  if not a then
    if not defines[algo] then return redis.error_reply('ERR redislimit: unknown algorithm ' .. tostring(algo)) end
    a = defines[algo]()
    algorithms[algo] = a
  end
  local p = {key = KEYS[i + 1], algo = algo}
  for j, name in ipairs(a.params) do p[name] = tonumber(ARGV[argc + j]) end
  argc = argc + 1 + #a.params
  parts[i] = p
end

-- The channel pauses are published on, which every op takes last.
local channel = ARGV[#ARGV]
local P = pause.load()
for _, p in ipairs(parts) do
  algorithms[p.algo].load(p)
  pause.sync(P, p, channel)
end

-- ownArgs is how many arguments each op takes before the statements and
-- the settles.
local ownArgs = {reserve = 3, parts = 2 + #parts, cancel = 3 + 2 * #parts, settle = 0, pause = 1, inspect = 0}
if not ownArgs[op] then return redis.error_reply('ERR redislimit: unknown op ' .. tostring(op)) end
local first = argc + ownArgs[op]
-- S: what the upstream stated, when the budget follows it (stated.lua):
-- its argument comes first after the op's, its key after the parts'.
local S = nil
if first < #ARGV and string.sub(ARGV[first], 1, 1) == '@' then
  S = stated.load(parts, ARGV[first], KEYS[#parts + 2])
  first = first + 1
end
if first < #ARGV then
  settle.all(P, parts, first, #ARGV - 1, KEYS[#KEYS])
end
if S then stated.apply(S) end

-- earliest returns the earliest slot >= at where every part admits
-- costs[i] units of part i. Every part is monotone (a slot that fits
-- keeps fitting later), so raising the common slot to each part's
-- earliest converges. A part of cost 0 does not hold the slot back.
local function earliest(at, costs)
  for _ = 1, 64 do
    local agreed = true
    for i, p in ipairs(parts) do
      if costs[i] > 0 then
        local s = algorithms[p.algo].earliest(p, at, costs[i])
        if s > at then at, agreed = s, false end
      end
    end
    if S then
      local s = stated.earliest(S, at, costs)
      if s > at then at, agreed = s, false end
    end
    if agreed then return at end
  end
  return nil
end

-- same returns a cost of n for every part.
local function same(n)
  local costs = {}
  for i = 1, #parts do costs[i] = n end
  return costs
end

-- remaining returns the least any part has left now.
local function remaining()
  local least = -1
  for _, p in ipairs(parts) do
    local r = algorithms[p.algo].remaining(p)
    if least < 0 or r < least then least = r end
  end
  if S then least = stated.remaining(S, least) end
  return least
end

-- saveSettled saves the parts that settles changed, for the ops that
-- save nothing themselves.
local function saveSettled()
  for _, p in ipairs(parts) do
    if p.settled then algorithms[p.algo].save(p) end
  end
end

-- reserve books costs[i] units on part i at one common slot, waiting at
-- most maxWait (-1: any time), no earlier than after from now. A part of
-- cost 0 books nothing, and its token is '-'.
local function reserve(costs, maxWait, after)
  local slot = earliest(math.max(now + after, P['until']), costs)
  if not slot then return redis.error_reply('ERR redislimit: parts found no common slot') end
  if maxWait >= 0 and slot - now > maxWait then
    saveSettled()
    return {0, slot - now - maxWait, remaining(), P.epoch, P.shifted, 0}
  end
  local reply = {1, slot - now, 0, P.epoch, P.shifted, slot}
  local least = -1
  for i, p in ipairs(parts) do
    if costs[i] > 0 then
      local left, tok = algorithms[p.algo].book(p, slot, costs[i])
      algorithms[p.algo].save(p)
      if least < 0 or left < least then least = left end
      reply[6 + i] = tok
    else
      if p.settled then algorithms[p.algo].save(p) end
      reply[6 + i] = '-'
    end
  end
  if S then
    stated.book(S, slot, costs)
    least = stated.remaining(S, least)
  end
  reply[3] = least
  return reply
end

if op == 'reserve' then
  -- n units on every part.
  return reserve(same(tonumber(ARGV[argc])), tonumber(ARGV[argc + 1]), tonumber(ARGV[argc + 2]))
elseif op == 'parts' then
  -- maxWait, after, then one cost per part.
  local costs = {}
  for i = 1, #parts do costs[i] = tonumber(ARGV[argc + 1 + i]) end
  return reserve(costs, tonumber(ARGV[argc]), tonumber(ARGV[argc + 1]))
elseif op == 'settle' then
  -- only the settles riding along.
  saveSettled()
  return 1
elseif op == 'cancel' then
  -- a booking at slot under the pause state (epoch, shifted), with each
  -- part's token and the units it booked.
  local epoch, shifted, slot = tonumber(ARGV[argc]), tonumber(ARGV[argc + 1]), tonumber(ARGV[argc + 2])
  local moved = 0
  if P.epoch ~= 0 and (epoch == P.epoch or epoch == 0) then
    if epoch == 0 then shifted = 0 end
    moved = P.shifted - shifted
  end
  if slot + moved < now then -- the units have been used
    saveSettled()
    return 0
  end
  local given = 0
  for i, p in ipairs(parts) do
    local tok = tokens(ARGV[argc + 1 + 2 * i])
    if tok and not p.new and algorithms[p.algo].give(p, tok, tonumber(ARGV[argc + 2 + 2 * i])) then
      algorithms[p.algo].save(p)
      given = 1
    elseif p.settled then
      algorithms[p.algo].save(p)
    end
  end
  return given
elseif op == 'pause' then
  -- for d from now.
  local changed, msg = pause.apply(P, parts, tonumber(ARGV[argc]), channel)
  if changed == 0 then saveSettled() end
  return {changed, P.epoch, P.shifted, msg}
elseif op == 'inspect' then
  -- takes nothing: remaining, how long until one unit fits, units booked
  -- ahead, how long the key stays paused.
  saveSettled()
  local nextSlot = earliest(math.max(now, P['until']), same(1)) or now
  local ahead = 0
  for _, p in ipairs(parts) do
    ahead = math.max(ahead, algorithms[p.algo].ahead(p))
  end
  return {remaining(), nextSlot - now, ahead, math.max(P['until'] - now, 0), P.epoch, P.shifted}
end
