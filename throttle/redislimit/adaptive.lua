-- adaptive.lua: the learned rate of a key shared through Redis, as
-- throttle/adaptive.go learns it in process, with the same constants and
-- names (rate, est, best, calm, stated, first, probe, updated, seen,
-- paused, tat, cutTat, buckets; cut, climb, relay, admitted, sent). It
-- follows now.lua and runs on its own (adaptive.go), not in the budget
-- script.
--
-- KEYS[1] is the key's state, prefix{key}:adaptive4:<ceiling> (the 4 is the
-- layout of fields below: a new layout takes a new number).
-- ARGV: op ('reserve', 'cancel' or 'pause'), the frozen time (now.lua),
-- the ceiling and the floor (units per second), the max hold (µs), the
-- born and the last gen of the key's changes the process knows (born is
-- when the state was made, so that a state made again after an expiry
-- or a restart is told apart), then the op's own
-- arguments, then, for 'reserve', the signals the process learned since
-- its last call on the key: their count, then per signal ago (µs since
-- its answer arrived), latency (µs), throttled (0 or 1), stated (a rate
-- per second the upstream stated, or 0) and early (µs until the next unit
-- of a quota stated at 0 comes back, or -1). Every op takes the Client's
-- channel last.
--
-- The state is one string: packed doubles, the fields below, then the
-- buckets ((index, ok, throttled) each), then how many bookings lie
-- ahead and each (seq, slot, units), in slot order; then the changes as
-- text, oldest first, at most maxChanges, one a line, "gen kind at
-- value": kind 1 laid the bookings ahead out again after a cut (relay),
-- value "seq:slot,..." the bookings it moved and where to; kind 2 moved
-- every slot after at later by value µs (a pause). A process maps a
-- booking's slot through the changes after the gen it was booked at, so
-- that its sleepers follow the cuts and pauses any process made. Read the
-- fields with redis-cli:
--   EVAL "return {struct.unpack(string.rep('d', 24), redis.call('GET', KEYS[1]))}" 1 <key>
-- (numbers come back truncated to integers).

-- Tuning, as in throttle/adaptive.go (times in µs).
local adaptiveTarget = 0.95
local adaptiveStatedTarget = 0.97
local adaptiveBeta = 0.7
local adaptiveProbe = 1e-5
local adaptiveProbePace = 25
local adaptiveRegain = 0.975
local adaptiveClimb = 500000
local adaptiveBucket = 100000
local adaptiveBuckets = 30
local adaptiveMinSpan = 1000000
local adaptiveSaturated = 0.2
local adaptiveFlood = 1.5
local adaptiveCalm = 5000000
local adaptiveNudge = 0.98
local adaptiveLead = 1.2
local adaptivePaced = 1.2
local adaptiveCalmShare = 0.05
local adaptiveNoiseWindow = adaptiveBuckets * adaptiveBucket
local adaptiveNoiseLeast = 3
local adaptiveNoiseRun = 2 * (1 - adaptiveNudge)
local adaptiveNoiseRunLeast = 2
local adaptiveSettled = 1.01
local adaptiveFell = 3
local adaptiveStorm = 1 / 3
local adaptiveOverStep = 0.85
local adaptiveOverEvery = 0.4
local adaptiveOverEveryStep = 0.95

-- maxChanges bounds the changes kept: a booking older than all of them
-- follows only those kept. learnedKeep is how long the state outlives its
-- last answer, slot and pause, so that what was learned is not lost to a
-- lull.
local maxChanges = 32
local learnedKeep = 600 * 1000000
-- maxAhead bounds the bookings ahead kept, to relay and move: past it the
-- oldest is dropped, and a cut no longer moves it.
local maxAhead = 1024

local fields = {'rate', 'est', 'best', 'stated', 'first', 'probe', 'updated', 'seen', 'paused',
  'tat', 'cutTat', 'seq', 'gen', 'last', 'born',
  'noiseNudged', 'noiseBefore', 'noiseFrom', 'noiseShare', 'noiseOk', 'noiseThr', 'calm', 'over', 'unmeasured'}
local layout = '<' .. string.rep('d', #fields)
local bucketLayout = '<' .. string.rep('d', 3 * adaptiveBuckets)

local op = ARGV[1]
local ceiling, floor = tonumber(ARGV[3]), tonumber(ARGV[4])
local maxHold, born, known = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

-- load reads the key's state, or starts it at the ceiling.
local k = {buckets = {}, changes = {}, ahead = {}}
local gen0 = 0 -- the gen before this call
local raw = redis.call('GET', KEYS[1])
if raw then
  local v = {struct.unpack(layout, raw)}
  for i, f in ipairs(fields) do k[f] = v[i] end
  local at = v[#fields + 1]
  local b = {struct.unpack(bucketLayout, raw, at)}
  at = b[#b]
  for i = 0, adaptiveBuckets - 1 do
    k.buckets[i] = {index = b[3 * i + 1], ok = b[3 * i + 2], throttled = b[3 * i + 3]}
  end
  gen0 = k.gen
  local n
  n, at = struct.unpack('<d', raw, at)
  for _ = 1, n do
    local seq, slot, units, next = struct.unpack('<ddd', raw, at)
    k.ahead[#k.ahead + 1] = {seq, slot, units}
    at = next
  end
  for line in string.gmatch(string.sub(raw, at), '[^\n]+') do
    local gen, kind, from, value = string.match(line, '^(%d+) (%d) (%d+) (%S+)$')
    k.changes[#k.changes + 1] = {tonumber(gen), tonumber(kind), tonumber(from), value}
  end
else
  for _, f in ipairs(fields) do k[f] = 0 end
  k.rate, k.first, k.updated, k.last, k.born = ceiling, -1, now, now, now
  for i = 0, adaptiveBuckets - 1 do k.buckets[i] = {index = -1, ok = 0, throttled = 0} end
end

-- The bookings whose slot has come are gone from ahead.
do
  local kept = {}
  for _, a in ipairs(k.ahead) do
    if a[2] > now then kept[#kept + 1] = a end
  end
  k.ahead = kept
end

-- line returns change c as text: "gen kind at value".
local function line(c)
  return string.format('%d %d %d %s', c[1], c[2], c[3], c[4])
end

-- save writes the state back, kept learnedKeep past its latest slot,
-- pause and answer.
local function save()
  local v = {}
  for i, f in ipairs(fields) do v[i] = k[f] end
  local b = {}
  for i = 0, adaptiveBuckets - 1 do
    local x = k.buckets[i]
    b[#b + 1], b[#b + 2], b[#b + 3] = x.index, x.ok, x.throttled
  end
  local out = {struct.pack(layout, unpack(v)), struct.pack(bucketLayout, unpack(b)), struct.pack('<d', #k.ahead)}
  for _, a in ipairs(k.ahead) do out[#out + 1] = struct.pack('<ddd', a[1], a[2], a[3]) end
  local lines = {}
  for i = math.max(1, #k.changes - maxChanges + 1), #k.changes do
    lines[#lines + 1] = line(k.changes[i])
  end
  out[#out + 1] = table.concat(lines, '\n')
  local ttl = math.max(k.tat, k.paused, k.seen, now) - now + learnedKeep
  redis.call('SET', KEYS[1], table.concat(out), 'PX', millis(ttl))
end

-- change records a change of the schedule after at.
local function change(kind, at, value)
  k.gen = k.gen + 1
  k.changes[#k.changes + 1] = {k.gen, kind, at, value}
end

-- publish tells every process of the changes made by this call, with
-- the rate, on the channel (the last argument): "change <state key>
-- <born> <rate> <gen kind at value>...", the key written as message.lua
-- writes it. Replies are the backstop, as for pauses: pub/sub delivers
-- at most once.
local function publish(from)
  if k.gen <= from then return end
  local msg = {'change', field(KEYS[1]), string.format('%d', k.born), string.format('%.17g', k.rate)}
  for _, c in ipairs(k.changes) do
    if c[1] > from then msg[#msg + 1] = line(c) end
  end
  redis.call('PUBLISH', ARGV[#ARGV], table.concat(msg, ' '))
end

local function clamp(rate)
  return math.min(math.max(rate, floor), ceiling)
end

-- cost returns the spacing n units take at the rate, in µs rounded up.
local function cost(n)
  return math.ceil(n * 1000000 / k.rate)
end

-- count adds an answer to its bucket.
local function count(t, throttled)
  local i = math.floor(t / adaptiveBucket)
  local b = k.buckets[i % adaptiveBuckets]
  if b.index ~= i then b.index, b.ok, b.throttled = i, 0, 0 end
  if throttled then
    b.throttled = b.throttled + 1
    k.noiseThr = k.noiseThr + 1
  else
    b.ok = b.ok + 1
    k.noiseOk = k.noiseOk + 1
  end
end

-- tally returns the answers admitted and throttled over the last span,
-- at most the buckets' three seconds.
local function tally(t, span)
  local from = -1
  if t >= span then from = math.floor((t - span) / adaptiveBucket) end
  local ok, thr = 0, 0
  for i = 0, adaptiveBuckets - 1 do
    local b = k.buckets[i]
    if b.index > from then ok, thr = ok + b.ok, thr + b.throttled end
  end
  return ok, thr
end

-- share returns the throttled share of ok and thr answers, or 0.
local function share(ok, thr)
  if ok + thr <= 0 then return 0 end
  return thr / (ok + thr)
end

-- noisy reports whether a throttled answer at the settled rate leaves
-- the rate alone, and gives back a nudge judged to be for noise (see
-- throttle/adaptive_noise.go).
local function noisy(t, from)
  k.noiseFrom = from
  local since = k.noiseThr - 1
  if since >= adaptiveNoiseRunLeast and share(k.noiseOk, since) > adaptiveNoiseRun then return false end
  if k.noiseNudged > 0 then
    if t - k.noiseNudged < adaptiveNoiseWindow then return true end
    k.noiseNudged, k.noiseShare = 0, 0
    local after = share(k.noiseOk, since)
    if since >= adaptiveNoiseLeast and k.noiseBefore - after < (1 - adaptiveNudge) / 2 then
      k.noiseShare = after
      if k.noiseFrom > k.rate then
        k.rate = k.noiseFrom
        if k.stated <= t then k.est = math.max(k.est, k.rate / adaptiveTarget) end
      end
    end
  end
  local ok, thr = tally(t, adaptiveNoiseWindow)
  local expect = k.noiseShare * (ok + thr - 1)
  return expect > 0 and thr <= expect + 2 * math.sqrt(expect)
end

-- nudged starts judging a nudge at t, from the rate before it.
local function nudged(t)
  k.noiseNudged = math.max(t, 1)
  if k.noiseFrom == 0 then k.noiseFrom = k.rate end
  local ok, thr = tally(t, adaptiveNoiseWindow)
  k.noiseBefore = math.max(share(k.noiseOk, k.noiseThr - 1), share(ok, thr - 1))
end

-- admitted returns the units admitted per second over the last span and
-- the fraction throttled, or 0 without a bucket of answers.
local function admitted(t, span)
  local d = math.min(t - k.first, span, adaptiveBuckets * adaptiveBucket)
  if k.first < 0 or d < adaptiveBucket then return 0, 0 end
  local from = math.floor((t - d) / adaptiveBucket)
  local ok, thr = 0, 0
  for i = 0, adaptiveBuckets - 1 do
    local b = k.buckets[i]
    if b.index >= from then ok, thr = ok + b.ok, thr + b.throttled end
  end
  if ok + thr == 0 then return 0, 0 end
  -- per second of what the buckets counted cover (see
  -- throttle/adaptive.go)
  return ok / ((t - math.max(from * adaptiveBucket, k.first)) / 1000000), thr / (ok + thr)
end

-- sent returns the answers per second over the last span.
local function sent(t, span)
  local from = math.floor((t - span) / adaptiveBucket)
  local n = 0
  for i = 0, adaptiveBuckets - 1 do
    local b = k.buckets[i]
    if b.index >= from then n = n + b.ok + b.throttled end
  end
  return n / ((t - from * adaptiveBucket) / 1000000)
end

-- relay lays the bookings ahead out again at the rate, where they lie
-- closer together: order is kept, and nothing moves earlier. The change
-- lists the bookings moved, "seq:slot,...".
local function relay()
  local nxt, moved = -math.huge, {}
  for _, a in ipairs(k.ahead) do
    if a[2] < nxt then
      a[2] = nxt
      moved[#moved + 1] = string.format('%d:%d', a[1], a[2])
    end
    nxt = a[2] + cost(a[3])
  end
  k.tat = math.max(k.tat, nxt)
  if #moved > 0 then change(1, now, table.concat(moved, ',')) end
end

-- cut lowers the rate after a throttled answer at t.
local function cut(t)
  local from = k.noiseFrom
  k.noiseFrom = 0 -- a cut since a nudge: the nudge is not given back
  local e, throttled = admitted(t, adaptiveBuckets * adaptiveBucket)
  local last, lastThrottled = admitted(t, adaptiveMinSpan)
  -- not while a pause the upstream asked for lasts: a bucket refilled
  -- over it (see throttle/adaptive.go)
  if last > e and k.paused <= t then e = last end
  local target = e * adaptiveTarget
  -- less than a second of answers: keep the margin twice (see
  -- throttle/adaptive.go).
  if t - k.first < adaptiveMinSpan then target = target * adaptiveTarget end
  local hi = math.min(sent(t, adaptiveClimb), k.rate)
  if e > 0 and hi > e and (throttled < adaptiveSaturated or hi < adaptiveFlood * e) then
    e = (e + hi) / 2
    target = e
  end
  if e == 0 then
    -- by beta, but in the first second not below what was admitted
    -- since the first answer, less the margin twice (see
    -- throttle/adaptive.go).
    k.rate = k.rate * adaptiveBeta
    local ok = tally(t, t - k.first + adaptiveBucket)
    if t > k.first and t - k.first < adaptiveMinSpan and ok >= 2 then
      k.rate = math.max(k.rate, ok / ((t - k.first) / 1000000) * adaptiveTarget * adaptiveTarget)
    end
  else
    -- settled: throttled at the last cut's rate after the first second:
    -- a nudge (see throttle/adaptive.go).
    -- Only where the rate was the pace: callers that send less than it
    -- (few, with long round trips) measure what they sent, not the rate.
    -- Units booked a second ahead and more: the callers wait on the
    -- rate, and it is the pace.
    -- Not while a pause the upstream asked for lasts: the units booked
    -- past it wait on the pause, not on the rate.
    local settled = t - k.first >= adaptiveMinSpan and k.rate <= k.est * adaptiveTarget * adaptiveSettled
      and (k.rate <= adaptivePaced * sent(t, adaptiveMinSpan) or k.tat - t >= adaptiveMinSpan)
      and k.paused <= t
    -- fell: a run of throttled answers at a settled rate the upstream
    -- was seen to admit (calm; see throttle/adaptive.go): bisect what
    -- the last second admitted and the rate, by at most beta a cut.
    -- over: a run of throttled answers since the last cut above any
    -- rate seen admitted, or any throttled answer within the noise
    -- window of such a cut (see throttle/adaptive.go): bisect what the
    -- last second admitted, less the margin, and the rate, by at most
    -- adaptiveOverStep a cut.
    local fell, over, every, unmeasured = false, false, false, false
    if settled and t - k.first >= adaptiveBuckets * adaptiveBucket and k.rate <= k.calm
      and lastThrottled >= adaptiveSaturated and lastThrottled * sent(t, adaptiveMinSpan) >= adaptiveFell then
      settled, fell = false, true
      target = (last + k.rate) / 2
    elseif settled and (k.rate > k.calm and k.noiseThr >= adaptiveFell and share(k.noiseOk, k.noiseThr) >= adaptiveSaturated
      or k.over > 0 and t - k.over < adaptiveNoiseWindow) then
      settled, over = false, true
      local step = adaptiveOverStep
      if share(k.noiseOk, k.noiseThr) >= adaptiveOverEvery then step, every = adaptiveOverEveryStep, true end
      target = math.max((last * adaptiveTarget + k.rate) / 2, k.rate * step)
    end
    if fell then
      k.rate = math.min(k.rate, math.max(target, k.rate * adaptiveBeta))
      k.calm = k.rate
    elseif over then
      k.rate = math.min(k.rate, target)
      if not every then k.over = t end
    elseif k.rate > target and not settled then
      k.rate = math.max(target, k.rate * adaptiveBeta * adaptiveBeta)
      unmeasured = k.rate > target
    elseif settled and noisy(t, from) then
      return -- noise, or a nudge still being judged
    elseif settled then
      nudged(t)
      k.rate = k.rate * adaptiveNudge
    else
      k.rate = k.rate * adaptiveNudge
    end
    -- est from the first measured cut, best after a second of answers
    -- (see throttle/adaptive.go).
    if k.stated <= t then
      k.est = k.rate / adaptiveTarget
      -- unmeasured: the cut fell short of what the answers measured, so
      -- the rate it left is no estimate to return to.
      k.unmeasured = unmeasured and 1 or 0
      if over then
        k.best = k.est
      elseif t - k.first >= adaptiveMinSpan and not unmeasured then
        k.best = math.max(k.best, k.est)
      end
    end
  end
  k.rate = clamp(k.rate)
  relay()
  k.cutTat = now + cost(1)
  k.updated, k.probe = t, t
  k.noiseOk, k.noiseThr = 0, 0
end

-- climb raises the rate after an admitted answer at t.
local function climb(t)
  local dt = (t - k.updated) / 1000000
  k.updated = t
  if k.est > 0 and t - k.probe >= adaptiveCalm and k.rate < k.best * adaptiveStorm then
    k.est, k.probe = k.best, t
  end
  -- a second at an estimate from the first second's cuts without a
  -- throttled answer: half the second margin back (see
  -- throttle/adaptive.go).
  if k.est > 0 and k.best == 0 and k.unmeasured == 0 and k.stated <= t and t - k.probe >= adaptiveMinSpan then
    k.est = k.est / adaptiveRegain
    k.best = k.est
  end
  local target = k.est * adaptiveTarget
  if k.stated > t then target = k.est end
  local rate = k.rate
  if k.est == 0 then
    rate = rate * math.pow(2, dt)
  elseif rate < target * 0.99 then
    rate = rate + (target - rate) * math.min(1, dt / (adaptiveClimb / 1000000))
    k.probe = t
  elseif k.stated <= t then
    local s = (t - k.probe) / 1000000
    -- the last cut came after the first storm, so a probe found the
    -- limit: the next one runs on a slower clock below adaptiveProbePace
    -- (see throttle/adaptive.go).
    if k.cutTat - k.first > adaptiveBuckets * adaptiveBucket then
      s = s * math.min(1, target / adaptiveProbePace)
    end
    rate = math.max(rate, target * (1 + adaptiveProbe * s * s * s))
  end
  local lead = adaptiveLead
  if k.est == 0 or rate < target / 2 then lead = 2 end
  local used = admitted(t, 1000000)
  if used > 0 and rate > k.rate then rate = math.max(k.rate, math.min(rate, lead * used)) end
  -- calm: a second of answers, few throttled, at what was sent (see
  -- throttle/adaptive.go).
  if t - k.first >= adaptiveMinSpan and share(tally(t, adaptiveMinSpan)) < adaptiveCalmShare then
    k.calm = math.max(k.calm, math.min(k.rate, sent(t, adaptiveMinSpan)))
  end
  k.rate = clamp(rate)
end

-- hold moves every slot ahead, and every new one, later so that nothing
-- is due before stop (capped at the max hold from now); holds do not
-- compound. It reports whether anything moved.
local function hold(stop)
  stop = math.min(stop, now + maxHold)
  if stop <= k.paused or stop <= now then return false end
  local shift = stop - math.max(now, k.paused)
  k.paused = stop
  if k.tat > now then k.tat = k.tat + shift end
  for _, a in ipairs(k.ahead) do a[2] = a[2] + shift end
  change(2, now, string.format('%d', shift))
  return true
end

-- learn applies one signal that arrived at t.
local function learn(t, latency, throttled, stated, early)
  k.seen = math.max(k.seen, t)
  -- an admitted answer with a quota stated spent: nothing more until its
  -- next unit comes back, for every process, with no round trip of its
  -- own (see throttle/redislimit/adaptive.go, Learn)
  if early >= 0 and not throttled then hold(t + early) end
  if stated > 0 then
    k.est = stated * adaptiveStatedTarget
    k.rate = clamp(k.est)
    k.stated = t + maxHold
    k.updated, k.probe = t, t
    return
  end
  -- nothing has restated the limit for the max hold: it lapses, and the
  -- rate is learned again from the answers (see throttle/adaptive.go,
  -- Learn)
  if k.stated ~= 0 and k.stated <= t then k.est, k.stated = 0, 0 end
  if k.first < 0 then k.first = t end
  if early >= 0 and early / 1000000 * k.rate > 2 then throttled = true end
  count(t, throttled)
  if throttled and t - latency >= k.cutTat then
    cut(t)
  elseif not throttled then
    climb(t)
  end
end

-- reply returns the rate, the born, the gen and the changes the process
-- has not seen, after head.
local function reply(head)
  if born ~= k.born then known = 0 end
  head[#head + 1] = string.format('%.17g', k.rate)
  head[#head + 1] = k.born
  head[#head + 1] = k.gen
  for _, c in ipairs(k.changes) do
    if c[1] > known then head[#head + 1] = line(c) end
  end
  return head
end

if op == 'reserve' then
  -- n, maxWait (-1: any), after, then the signals.
  local n, maxWait, after = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
  local m = tonumber(ARGV[11])
  for j = 12, 11 + 5 * m, 5 do
    -- answers carried late keep their order: time never goes back.
    local t = math.min(math.max(now - tonumber(ARGV[j]), k.last), now)
    k.last = t
    learn(t, tonumber(ARGV[j + 1]), ARGV[j + 2] == '1', tonumber(ARGV[j + 3]), tonumber(ARGV[j + 4]))
  end
  local slot = math.max(now + after, k.tat, k.paused)
  if maxWait >= 0 and slot - now > maxWait then
    if m > 0 or not raw then save() end
    publish(gen0)
    return reply({0, slot - now - maxWait, 0, 0})
  end
  k.tat = slot + cost(n)
  k.seq = k.seq + 1
  if slot > now then
    k.ahead[#k.ahead + 1] = {k.seq, slot, n}
    if #k.ahead > maxAhead then table.remove(k.ahead, 1) end
  end
  save()
  publish(gen0)
  return reply({1, slot - now, slot, k.seq})
elseif op == 'cancel' then
  -- seq of the booking: it leaves the bookings ahead, and its spacing
  -- comes back when it is the last of them. Once: a second cancel finds
  -- nothing.
  local seq = tonumber(ARGV[8])
  if not raw or born ~= k.born then return 0 end
  for i, a in ipairs(k.ahead) do
    if a[1] == seq then
      if i == #k.ahead then k.tat = math.min(k.tat, math.max(a[2], now)) end
      table.remove(k.ahead, i)
      save()
      return 1
    end
  end
  return 0
elseif op == 'pause' then
  -- d (µs, capped at the max hold): every slot ahead and every new one
  -- moves later, so that nothing is due for d from now.
  if not hold(now + tonumber(ARGV[8])) then return reply({0}) end
  save()
  publish(gen0)
  return reply({1})
end
return redis.error_reply('ERR redislimit: unknown adaptive op ' .. tostring(op))
