-- pause.lua: a key's pause, as throttle/pause.go, with the names of
-- pause-names.md. The pause state is a hash at KEYS[1] with
--   until    the end of the current pause: nothing is due before it
--   shifted  the total that pauses have moved the key's schedule
--   since    when the latest pause that moved anything began
--   epoch    when the hash was created, so that a budget reset by a
--            restart or an expiry is told apart from the one before
-- A part records the epoch and shifted it has applied, and applies what
-- it has not yet (a pause made through another limiter on the key) when
-- it is next touched. redis-cli reads it with HGETALL <prefix>{<key>}:pause.
--
-- A pause moves every unit ahead (slot > now) later by by. A fixed window
-- may move some further, to keep its windows within their limit: those
-- pushes are published with the pause, as "suffix=seq:extra,..." after
-- "epoch shifted pausekey", so that sleepers follow them too.
local pause = {}

function pause.load()
  local v = redis.call('HMGET', KEYS[1], 'until', 'shifted', 'since', 'epoch')
  return {
    ['until'] = tonumber(v[1]) or 0,
    shifted = tonumber(v[2]) or 0,
    since = tonumber(v[3]) or 0,
    epoch = tonumber(v[4]) or 0,
  }
end

-- pushes formats the steps a part's shift returned, or returns nil.
local function pushes(p, steps)
  if not steps or #steps == 0 then return nil end
  local out = {}
  for i, st in ipairs(steps) do out[i] = fmt(st[1]) .. ':' .. fmt(st[2]) end
  return string.sub(p.key, #KEYS[1] - #'pause' + 1) .. '=' .. table.concat(out, ',')
end

-- publish tells every process of the key's pause state and of the pushes:
-- "<epoch> <shifted> <pause key> <push>...", the key written as
-- message.lua writes it.
local function publish(P, channel, pushed)
  local msg = fmt(P.epoch) .. ' ' .. fmt(P.shifted) .. ' ' .. field(KEYS[1])
  for _, x in ipairs(pushed) do msg = msg .. ' ' .. x end
  redis.call('PUBLISH', channel, msg)
  return msg
end

-- sync applies to part p the pauses it has not applied yet, publishing
-- any pushes on channel.
function pause.sync(P, p, channel)
  if P.epoch == 0 then return end
  local s = p.state
  if not p.new then
    local d = P.shifted
    if s.epoch == P.epoch then d = P.shifted - s.shifted end
    if d > 0 then
      local x = pushes(p, algorithms[p.algo].shift(p, P.since, d))
      if x then publish(P, channel, {x}) end
    end
  end
  s.epoch, s.shifted = P.epoch, P.shifted
end

-- The pauses that moved something are kept as marks, as throttle/pause.go
-- keeps them, in the hash field marks: (since, prior) pairs, '<i8i8'
-- each, oldest first, at most maxMarks. since is when the pause began,
-- prior the key's shifted before it. A unit a pause found due stayed
-- where it was, while shifted grew: moved tells where a booking lies, for
-- a settle. Only pauses and settles read them.
local maxMarks = 16

function pause.mark(P, since, prior)
  local marks = redis.call('HGET', KEYS[1], 'marks') or ''
  if #marks >= 16 * maxMarks then marks = string.sub(marks, 17) end
  redis.call('HSET', KEYS[1], 'marks', marks .. struct.pack('<i8i8', since, prior))
  P.marks = nil
end

-- moved returns where a unit booked at slot, when the key's schedule had
-- moved by shifted, lies now: the first pause after the booking that
-- found it due left it where it was then; no pause that found it ahead
-- moved it less than the whole shift since.
function pause.moved(P, slot, shifted)
  if not P.marks then P.marks = redis.call('HGET', KEYS[1], 'marks') or '' end
  local u = slot - shifted
  for i = 1, #P.marks - 15, 16 do
    local since, prior = struct.unpack('<i8i8', P.marks, i)
    if prior >= shifted and u <= since - prior then return u + prior end
  end
  return u + P.shifted
end

-- apply pauses the key until d from now: every slot still ahead moves
-- later by as much as the pause's end moves. Pauses do not compound: one
-- that ends no later than the current one changes nothing. It publishes
-- the new state on channel and returns whether anything changed, and
-- the message.
function pause.apply(P, parts, d, channel)
  local stop = now + d
  if stop <= P['until'] then return 0, '' end
  local by = stop - math.max(P['until'], now)
  if P.epoch == 0 then P.epoch = now end
  if by > 0 then pause.mark(P, now, P.shifted) end
  P['until'], P.shifted, P.since = stop, P.shifted + by, now
  redis.call('HSET', KEYS[1], 'until', fmt(P['until']), 'shifted', fmt(P.shifted), 'since', fmt(P.since), 'epoch', fmt(P.epoch))
  local ttl = math.max(stop - now, redis.call('PTTL', KEYS[1]) * 1000)
  local pushed = {}
  for _, p in ipairs(parts) do
    if not p.new then
      -- sync brought the part up to the pause state before this one.
      local x = pushes(p, algorithms[p.algo].shift(p, now, by))
      if x then pushed[#pushed + 1] = x end
      p.state.epoch, p.state.shifted = P.epoch, P.shifted
      algorithms[p.algo].save(p)
      ttl = math.max(ttl, redis.call('PTTL', p.key) * 1000)
    end
  end
  redis.call('PEXPIRE', KEYS[1], millis(ttl + 1000000))
  return 1, publish(P, channel, pushed)
end
