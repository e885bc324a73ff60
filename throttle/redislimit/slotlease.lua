-- slotlease.lua closes the slot lease script (state.lua, gcra.lua,
-- pause.lua, slotlease.lua; see slotlease.go): it books a block of a
-- bucket's units for one process, which hands them out locally, and
-- gives back a block's unused tail.
--
-- KEYS[1] is the key's pause state, KEYS[2] the bucket's state, KEYS[3]
-- the processes that lease on it (a sorted set: process id, scored by
-- when its heartbeat runs out).
--
-- ARGV: op ('lease' or 'giveback'), the frozen time (see state.lua), 1,
-- the algorithm ('tb' or 'lb') and its interval, sub and burst, then the op's
-- own arguments, then the pause channel.
local op, algo = ARGV[1], ARGV[4]
if ARGV[3] ~= '1' or not defines[algo] or defines[algo] ~= defines.tb then
  return redis.error_reply('ERR redislimit: a lease takes one bucket, got ' .. tostring(algo))
end
local g = defines[algo]()
algorithms[algo] = g
local p = {key = KEYS[2], algo = algo, interval = tonumber(ARGV[5]), sub = tonumber(ARGV[6]), burst = tonumber(ARGV[7])}
local argc = 8
local channel = ARGV[#ARGV]
local P = pause.load()
g.load(p)
pause.sync(P, p, channel)
local s, T, B = p.state, p.interval, p.burst

if op == 'lease' then
  -- want units, none later than horizon from now, the first no earlier
  -- than after from now; the heartbeat of process id, good for ttl. Unit
  -- i (1-based) of the block is due at max(first, tat + (i-burst)*interval),
  -- rounded up to a whole µs, with first and tat (µs, less owe ns) as
  -- replied: the slots GCRA gives a reservation of the block's units, one
  -- after the other.
  local want, horizon, after = tonumber(ARGV[argc]), tonumber(ARGV[argc + 1]), tonumber(ARGV[argc + 2])
  local id, ttl = ARGV[argc + 3], tonumber(ARGV[argc + 4])
  redis.call('ZADD', KEYS[3], now + ttl, id)
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  local live = redis.call('ZCARD', KEYS[3])
  redis.call('PEXPIRE', KEYS[3], millis(ttl))
  local first, tat, owe = now + after, s.tat, s.owe
  local room = now + horizon - tat -- how far the horizon lies past tat
  if p.sub == 0 then room = math.floor(room / T) else room = math.floor((room * 1000 + owe) / (T * 1000 + p.sub)) end
  local k = math.min(want, B, B + room)
  if P['until'] > now or k <= 0 or first > now + horizon then
    -- paused, or spent past the horizon: nothing, and when one unit fits
    local at = g.earliest(p, math.max(first, P['until']), 1)
    return {0, at - now, live, P.epoch, P.shifted, now, 0, 0, 0, 0, 0}
  end
  local before = -1 -- the booking this one follows, if it may still be given back
  if tat >= first then before = s.latest end
  local slack = g.slackAt(p, first) -- for settles, as gcra.book
  g.advance(p, first, k)
  s.seq = s.seq + 1
  s.latest = s.seq
  g.pushSlack(p, s.seq, slack)
  g.save(p)
  return {k, 0, live, P.epoch, P.shifted, now, first, tat, s.seq, before, owe}
elseif op == 'giveback' then
  -- the block booked as seq, under the pause state (epoch, shifted),
  -- keeps only the units that left the bucket at tat (µs, less owe ns):
  -- the rest go back
  -- if the block is still the bucket's latest booking, and latest is the
  -- booking that may be given back next (the block's, when some of it
  -- stays; the one before it, when it all goes).
  local seq, latest, tat = tonumber(ARGV[argc]), tonumber(ARGV[argc + 1]), tonumber(ARGV[argc + 2])
  local owe, epoch, shifted = tonumber(ARGV[argc + 3]), tonumber(ARGV[argc + 4]), tonumber(ARGV[argc + 5])
  if p.new or s.latest ~= seq then return 0 end
  if epoch ~= 0 and epoch ~= P.epoch then return 0 end
  tat = tat + P.shifted - shifted
  if (tat - s.tat) * 1000 >= owe - s.owe then return 0 end
  s.tat, s.owe = tat, owe
  s.latest = latest
  g.save(p)
  return 1
end
return redis.error_reply('ERR redislimit: unknown lease op ' .. tostring(op))
