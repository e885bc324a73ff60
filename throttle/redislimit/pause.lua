-- pause.lua: a key's pause, as throttle/pause.go. The pause state is a
-- hash at KEYS[1] with
--   until  the end of the current pause
--   shift  the total shift pauses have applied to the key's schedule
--   since  when the last pause that shifted anything was made
--   epoch  when the hash was created, so that a budget reset by a
--          restart or an expiry is told apart from the one before
-- A part records the epoch and shift it has applied, and applies what it
-- has not yet (a pause made through another limiter on the key) when it
-- is next touched. redis-cli reads it with HGETALL <prefix>{<key>}:pause.
local pause = {}

function pause.load()
  local v = redis.call('HMGET', KEYS[1], 'until', 'shift', 'since', 'epoch')
  return {
    ['until'] = tonumber(v[1]) or 0,
    shift = tonumber(v[2]) or 0,
    since = tonumber(v[3]) or 0,
    epoch = tonumber(v[4]) or 0,
  }
end

-- sync applies to part p the pauses it has not applied yet.
function pause.sync(P, p)
  if P.epoch == 0 then return end
  local s = p.state
  if not p.new then
    local d = P.shift
    if s.epoch == P.epoch then d = P.shift - s.shift end
    if d > 0 then algorithms[p.algo].shift(p, P.since, d) end
  end
  s.epoch, s.shift = P.epoch, P.shift
end

-- apply pauses the key until d from now: every slot still ahead moves
-- later by as much as the pause's end moves. Pauses do not compound: one
-- that ends no later than the current one changes nothing. It publishes
-- "epoch shift pausekey" on channel, so that sleepers in every process
-- follow, and returns whether anything changed.
function pause.apply(P, parts, d, channel)
  local stop = now + d
  if stop <= P['until'] then return 0 end
  local by = stop - math.max(P['until'], now)
  if P.epoch == 0 then P.epoch = now end
  P['until'], P.shift, P.since = stop, P.shift + by, now
  redis.call('HSET', KEYS[1], 'until', fmt(P['until']), 'shift', fmt(P.shift), 'since', fmt(P.since), 'epoch', fmt(P.epoch))
  local ttl = math.max(stop - now, redis.call('PTTL', KEYS[1]) * 1000)
  for _, p in ipairs(parts) do
    if not p.new then
      -- sync brought the part up to the pause state before this one.
      algorithms[p.algo].shift(p, now, by)
      p.state.epoch, p.state.shift = P.epoch, P.shift
      algorithms[p.algo].save(p)
      ttl = math.max(ttl, redis.call('PTTL', p.key) * 1000)
    end
  end
  redis.call('PEXPIRE', KEYS[1], millis(ttl + 1000000))
  redis.call('PUBLISH', channel, fmt(P.epoch) .. ' ' .. fmt(P.shift) .. ' ' .. KEYS[1])
  return 1
end
