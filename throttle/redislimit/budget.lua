-- budget.lua closes the budget script: it reads the parts and runs the op.
--
-- KEYS[1] is the key's pause state, KEYS[2..] its parts' state, one per
-- limit on the key, all under one hash tag.
--
-- ARGV: op ('reserve', 'cancel', 'pause' or 'inspect'), the frozen time
-- (see now.lua), the number of parts, then for each part its algorithm
-- and that algorithm's params, then the op's own arguments, then the
-- pause channel.
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

-- earliest returns the earliest slot >= at where every part admits n
-- units. Every part is monotone (a slot that fits keeps fitting later),
-- so raising the common slot to each part's earliest converges.
local function earliest(at, n)
  for _ = 1, 64 do
    local settled = true
    for _, p in ipairs(parts) do
      local s = algorithms[p.algo].earliest(p, at, n)
      if s > at then at, settled = s, false end
    end
    if settled then return at end
  end
  return nil
end

-- remaining returns the least any part has left now.
local function remaining()
  local least = -1
  for _, p in ipairs(parts) do
    local r = algorithms[p.algo].remaining(p)
    if least < 0 or r < least then least = r end
  end
  return least
end

if op == 'reserve' then
  -- n units, waiting at most maxWait (-1: any time), no earlier than
  -- after from now.
  local n, maxWait, after = tonumber(ARGV[argc]), tonumber(ARGV[argc + 1]), tonumber(ARGV[argc + 2])
  local slot = earliest(math.max(now + after, P['until']), n)
  if not slot then return redis.error_reply('ERR redislimit: parts found no common slot') end
  if maxWait >= 0 and slot - now > maxWait then
    return {0, slot - now - maxWait, remaining(), P.epoch, P.shifted, 0}
  end
  local reply = {1, slot - now, 0, P.epoch, P.shifted, slot}
  local least = -1
  for i, p in ipairs(parts) do
    local left, tok = algorithms[p.algo].book(p, slot, n)
    algorithms[p.algo].save(p)
    if least < 0 or left < least then least = left end
    reply[6 + i] = tok
  end
  reply[3] = least
  return reply
elseif op == 'cancel' then
  -- n units booked at slot under the pause state (epoch, shifted), with one
  -- token per part.
  local n, epoch, shifted, slot = tonumber(ARGV[argc]), tonumber(ARGV[argc + 1]), tonumber(ARGV[argc + 2]), tonumber(ARGV[argc + 3])
  local moved = 0
  if P.epoch ~= 0 and (epoch == P.epoch or epoch == 0) then
    if epoch == 0 then shifted = 0 end
    moved = P.shifted - shifted
  end
  if slot + moved < now then return 0 end -- the units have been used
  local given = 0
  for i, p in ipairs(parts) do
    local tok = {}
    for v in string.gmatch(ARGV[argc + 3 + i], '[^:]+') do tok[#tok + 1] = tonumber(v) end
    if not p.new and algorithms[p.algo].give(p, tok, n) then
      algorithms[p.algo].save(p)
      given = 1
    end
  end
  return given
elseif op == 'pause' then
  -- for d from now.
  local changed, msg = pause.apply(P, parts, tonumber(ARGV[argc]), channel)
  return {changed, P.epoch, P.shifted, msg}
elseif op == 'inspect' then
  -- takes nothing: remaining, how long until one unit fits, units booked
  -- ahead, how long the key stays paused.
  local nextSlot = earliest(math.max(now, P['until']), 1) or now
  local ahead = 0
  for _, p in ipairs(parts) do
    ahead = math.max(ahead, algorithms[p.algo].ahead(p))
  end
  return {remaining(), nextSlot - now, ahead, math.max(P['until'] - now, 0), P.epoch, P.shifted}
end
return redis.error_reply('ERR redislimit: unknown op ' .. tostring(op))
