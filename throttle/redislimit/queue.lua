-- queue.lua is the shared queue's script (see queue.go): at most n
-- permits held at once, every permit with its own id and an expiry, and
-- a line of waiters served first in, first out.
--
-- KEYS: the holders (zset: id -> expiry), the line (zset: id -> seq), the
-- waiters' expiries (zset: id -> expiry), the meta hash (seq, born) and
-- the ids released within a lease, permits and places (zset: id ->
-- expiry), all under one hash tag.
-- ARGV: op ('acquire', 'release', 'renew' or 'stats'), the frozen time
-- (test-only; 0 reads TIME), n, the lease (µs), the channel grants are
-- published on, then the op's own.
--
-- Times are microseconds of the server's TIME.
local now = tonumber(ARGV[2])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local holders, line, waitexp, meta, released = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local op, n, lease, channel = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local until_ = string.format('%d', now + lease)

-- A queue whose meta hash is missing is new, or Redis lost its data (a
-- restart without persistence): holders still running elsewhere do not
-- show yet. For one lease nobody takes a free permit, so that every live
-- holder's renewal (one per renewal period, shorter than the lease) can
-- claim its permit back first: the bound holds across the loss.
local born = tonumber(redis.call('HGET', meta, 'born'))
if not born then
  born = now
  redis.call('HSET', meta, 'born', string.format('%d', born))
end
redis.call('PEXPIRE', meta, 86400000)
local warm = now >= born + lease

-- purge drops the holders and waiters whose lease ran out: their process
-- stopped renewing (it died, or lost Redis for a lease). Its work is the
-- number dropped, each once.
local function purge()
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
  -- One by one: unpack has a limit, and a line may be long.
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', waitexp, '-inf', now)) do
    redis.call('ZREM', line, id)
  end
  redis.call('ZREMRANGEBYSCORE', waitexp, '-inf', now)
  redis.call('ZREMRANGEBYSCORE', released, '-inf', now)
end

-- promote hands free permits to the first waiters, in order, and tells
-- each on the channel.
local function promote()
  if not warm then
    return
  end
  local free = n - redis.call('ZCARD', holders)
  if free <= 0 then
    return
  end
  local first = redis.call('ZRANGE', line, 0, free - 1)
  for _, id in ipairs(first) do
    -- The permit keeps the waiter's lease, which its process renews:
    -- a waiter whose process died gets no fresh lease with it.
    local exp = redis.call('ZSCORE', waitexp, id) or until_
    redis.call('ZREM', line, id)
    redis.call('ZREM', waitexp, id)
    redis.call('ZADD', holders, exp, id)
    redis.call('PUBLISH', channel, 'grant ' .. id)
  end
end

-- expire keeps every key until its last lease has run out.
local function expire()
  local ttl = math.floor(lease / 1000) + 1000
  redis.call('PEXPIRE', holders, ttl)
  redis.call('PEXPIRE', line, ttl)
  redis.call('PEXPIRE', waitexp, ttl)
  redis.call('PEXPIRE', released, ttl)
end

purge()
promote()

if op == 'acquire' then
  -- ARGV[6] id, ARGV[7] 1 to wait in line, ARGV[8] the line's bound.
  -- Reply: 1 granted, 0 waiting, -1 line full, -2 no free permit.
  local id, wait, most = ARGV[6], ARGV[7] == '1', tonumber(ARGV[8])
  if redis.call('ZSCORE', holders, id) then
    return 1 -- a resent call that was granted
  end
  if redis.call('ZSCORE', line, id) then
    return 0
  end
  if redis.call('ZSCORE', released, id) then
    return -2 -- run after its own release: its caller has gone
  end
  local waiting = redis.call('ZCARD', line)
  if warm and waiting == 0 and redis.call('ZCARD', holders) < n then
    redis.call('ZADD', holders, until_, id)
    expire()
    return 1
  end
  if not wait then
    return -2
  end
  if waiting >= most then
    return -1
  end
  local seq = redis.call('HINCRBY', meta, 'seq', 1)
  redis.call('ZADD', line, seq, id)
  redis.call('ZADD', waitexp, until_, id)
  expire()
  return 0
end

if op == 'release' then
  -- ARGV[6] id. Reply: 1 a permit was freed, 2 a place in line was
  -- given up, 0 nothing (released already, or expired). A freed permit
  -- goes to the first waiter in the same call. The id is kept for a
  -- lease among the released, so that a call sent before the release and
  -- run after it (a renewal, or the acquire whose reply was lost, resent
  -- or overtaken on another connection) does not take it back.
  local id = ARGV[6]
  redis.call('ZADD', released, until_, id)
  expire()
  if redis.call('ZREM', holders, id) == 1 then
    promote()
    return 1
  end
  if redis.call('ZREM', line, id) == 1 then
    redis.call('ZREM', waitexp, id)
    return 2
  end
  return 0
end

if op == 'renew' then
  -- ARGV[6] the number of held ids, then the held ids, then the waiting
  -- ids. Every one gets a new lease. A held id that is gone, and was not
  -- released, is claimed back while a permit is free, since its request
  -- is running: Redis lost it (a restart without persistence, or from a
  -- snapshot older than the grant, or a failover to a replica that
  -- missed it), or its process could not renew for a lease. Once warm,
  -- promote has served the line first, so a free permit means nobody
  -- waits. While the queue is new, a waiting id that is gone, and was
  -- not released, joins the line again; later it stays gone.
  -- Reply: for each id, 1 holding, 2 waiting, 0 gone.
  local nheld = tonumber(ARGV[6])
  local out = {}
  for i = 1, nheld do
    local id = ARGV[6 + i]
    if redis.call('ZSCORE', holders, id) or
        (not redis.call('ZSCORE', released, id) and redis.call('ZCARD', holders) < n) then
      redis.call('ZADD', holders, until_, id)
      out[i] = 1
    else
      out[i] = 0
    end
  end
  for i = 7 + nheld, #ARGV do
    local id = ARGV[i]
    if redis.call('ZSCORE', line, id) then
      redis.call('ZADD', waitexp, until_, id)
    elseif not warm and not redis.call('ZSCORE', holders, id) and not redis.call('ZSCORE', released, id) then
      -- Redis lost the line: join it again, in the order renewals come.
      redis.call('ZADD', line, redis.call('HINCRBY', meta, 'seq', 1), id)
      redis.call('ZADD', waitexp, until_, id)
    end
  end
  promote() -- a lost grant message is made good here
  for i = 7 + nheld, #ARGV do
    local id = ARGV[i]
    if redis.call('ZSCORE', holders, id) then
      redis.call('ZADD', holders, until_, id)
      out[i - 6] = 1
    elseif redis.call('ZSCORE', line, id) then
      out[i - 6] = 2
    else
      out[i - 6] = 0
    end
  end
  expire()
  return out
end

if op == 'stats' then
  -- Reply: holders, waiters.
  return {redis.call('ZCARD', holders), redis.call('ZCARD', line)}
end

return redis.error_reply('queue: unknown op ' .. tostring(op))
