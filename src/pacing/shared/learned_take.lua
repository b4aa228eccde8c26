-- Takes from what the processes learned of a key's window, unless the shared gate is closed:
-- at least ARGV[1] units (the head's cost), up to ARGV[2] (one more for each request queued
-- behind it).
-- KEYS[1]: what is left in the current window (a count whose TTL is the window's end)
-- KEYS[2]: the quota per window (a hash: limit, window in ms; silent = 1 when the server
--          states nothing)
-- KEYS[3]: the gate, a key whose TTL is the pause (close_gate.lua)
-- KEYS[4]: the probe: one request is out to learn where a window stands (its TTL bounds it)
-- KEYS[5]: the line: the requests refused so far (a sorted set, each scored by the Redis
--          time at which it should ask again; a second past it, it is gone)
-- KEYS[6], KEYS[7] (optional): a silent server's estimate, shared (a hash: see
--          learned_note.lua), and the requests in flight against it (a sorted set, each
--          scored by the Redis time it was taken; ARGV[3] ms past it, it is gone)
-- ARGV[3]: how long a probe may be out, in ms; ARGV[4]: how long the others wait before
--          they look again while it is out, in ms
-- ARGV[5]: this request's id (the same for each of its asks); ARGV[6]: how long it has
--          waited so far, in ms
-- ARGV[7]: how often the fleet's slow start doubles its cap, in ms (a silent server)
-- KEYS[8] (optional): when each request in line began to wait (a sorted set, scored by the
--          Redis time; what is left goes to the ones that began first, see below); ARGV[8],
--          ARGV[9]: the turn's spread and its halving, in ms. A request
--          refused is told to ask again later, so that when a window opens the heads of every
--          process ask in the order they began to wait: against a stated quota, by up to the
--          spread, halved for every halving it has waited; against a silent server, whose
--          windows the store measures from when their first requests went, by up to the
--          spread, the less the closer it began to wait to the request in line that began
--          first, which asks at once (a spread after every window would lengthen each window
--          measured by it, one of 100 ms by a third).
-- Returns {1, taken, left} when taken (left -1: nothing is known, the request goes alone as
-- the probe of every process, and its answer will tell), {0, wait in ms} when the window is
-- spent, a probe is out or what is left is for those in line, {2, gate ms} when the gate is
-- closed (nothing taken). A request refused joins the line: what is left goes to those in
-- line before any request that has not waited. TTLs and the Redis server's time only: the
-- callers' clocks never enter Redis.
local cost = tonumber(ARGV[1])
local want = math.max(cost, tonumber(ARGV[2]))
local asker = ARGV[5]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- Gone from the line: a request a second late (its process ended, or it was served by a
-- take of several). One that comes later still has waited, and is in line by that.
local since = KEYS[8]
if since then
  for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now - 1000)) do
    redis.call('ZREM', since, gone)
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - 1000)
-- In line: refused before and still expected, or waiting elsewhere (its own process's
-- queue, its own pacer) for ARGV[6] ms or more: only a request that comes as another has just
-- been served has not waited.
local in_line = redis.call('ZSCORE', KEYS[5], asker) or tonumber(ARGV[6]) >= 250

-- Refused for `wait` ms: in line, due to ask again then, and later than the request in line
-- that began to wait first by its turn's spread (see KEYS[8]).
local silent = redis.call('HGET', KEYS[2], 'silent')
local function refuse(code, wait)
  local stay = wait + 1000
  if since then
    local spread, halving = tonumber(ARGV[8]), tonumber(ARGV[9])
    local waited = tonumber(ARGV[6])
    local began = now - waited
    local held = tonumber(redis.call('ZSCORE', since, asker))
    if not held or held > began then
      redis.call('ZADD', since, began, asker)
      held = began
    end
    if silent then
      local first = redis.call('ZRANGE', since, 0, 0, 'WITHSCORES')
      local lead = math.max(0, held - tonumber(first[2]))
      wait = wait + math.floor(spread * (1 - 0.5 ^ (lead / halving)))
    else
      wait = wait + math.floor(spread * 0.5 ^ math.min(waited / halving, 64))
    end
    if redis.call('PTTL', since) < stay then
      redis.call('PEXPIRE', since, stay)
    end
  end
  redis.call('ZADD', KEYS[5], now + wait, asker)
  if redis.call('PTTL', KEYS[5]) < stay then
    redis.call('PEXPIRE', KEYS[5], stay)
  end
  return {code, wait}
end

-- Taken: out of the line.
local function served()
  redis.call('ZREM', KEYS[5], asker)
  if since then
    redis.call('ZREM', since, asker)
  end
end

local gate = redis.call('PTTL', KEYS[3])
if gate > 0 then
  return refuse(2, gate)
end
local left = tonumber(redis.call('GET', KEYS[1]))
if not left then
  local limit = tonumber(redis.call('HGET', KEYS[2], 'limit'))
  if silent and KEYS[6] then
    -- The server states nothing: the fleet's own estimate of it (learned_note.lua) paces.
    local S, F = KEYS[6], KEYS[7]
    local probe_out = tonumber(ARGV[3])
    redis.call('ZREMRANGEBYSCORE', F, '-inf', now - probe_out)
    local f = redis.call('HMGET', S, 'q', 'probe', 'ptime', 'start')
    local q, probe, ptime, start = tonumber(f[1]), f[2], tonumber(f[3]), tonumber(f[4])
    if probe and ptime and now - ptime < probe_out then
      -- One request of all is out alone: the others wait for its answer.
      return refuse(0, math.max(1, math.min(probe_out - (now - ptime), tonumber(ARGV[4]))))
    end
    local alone = q ~= nil
    if not q then
      -- Nothing measured yet: a slow start for all the processes together, its cap on the
      -- requests in flight doubling every ARGV[7] ms from the first answer. The first
      -- refusal then finds the quota with few requests on their way.
      start = start or now
      local step = tonumber(ARGV[7]) or 100
      local steps = math.floor((now - start) / step)
      local flying = redis.call('ZCARD', F)
      if flying > 0 and flying + cost > 2 ^ math.min(steps, 30) then
        return refuse(0, math.max(1, start + (steps + 1) * step - now))
      end
    end
    if alone then
      -- A window nothing is counted of (a new one, or the pause after a refusal over): its
      -- first request goes alone, the probe of every process.
      redis.call('HSET', S, 'probe', asker, 'ptime', now)
    end
    redis.call('ZADD', F, now, asker)
    redis.call('PEXPIRE', F, probe_out)
    served()
    return {1, cost, -1}
  end
  if silent or (limit and cost > limit) then
    -- The server states nothing (each process's own pacer learns its silence), or no
    -- window could ever hold this request (the server will say so).
    served()
    return {1, want, -1}
  end
  -- Nothing known of the window now (the first request of all, or the last window ended):
  -- one request goes alone, and the others wait for what its answer tells (learned_note.lua
  -- ends the probe). A window guessed whole at its end would be spent twice over when the
  -- guess is early.
  if redis.call('SET', KEYS[4], '1', 'NX', 'PX', tonumber(ARGV[3])) then
    served()
    return {1, cost, -1}
  end
  return refuse(0, math.max(1, math.min(redis.call('PTTL', KEYS[4]), tonumber(ARGV[4]))))
end
-- A request in line may take what is left; one that has not waited, only what the others
-- in line leave: those due to ask again before this window ends (one refused until its end
-- waits for the next window, and holds nothing of this one).
local ends = redis.call('PTTL', KEYS[1])
local due = now + math.max(ends, 0)
local spare = left
-- When the last of the requests that what is left is kept for is due to ask.
local after = nil
if not in_line then
  spare = left - redis.call('ZCOUNT', KEYS[5], '-inf', due)
elseif since and not silent then
  -- In line, it leaves each other request in line that began to wait before it, and is due to
  -- ask in this window, its share of what is left (shared by every request in line due in
  -- this window, itself too). Not a silent server's count: its windows of one request (a
  -- rate) went later by the wait of each request held back (four processes on nginx at 10 r/s:
  -- 1.110 × where 1.051 ×). Each process's next request is in line by the time it waited
  -- in its own queue and asks as soon as the one before it was served: left to who asks
  -- first, one process's requests, one after another, took a whole window while the heads of
  -- the others, refused with them, waited out their turn's spread (four processes, 40 tasks,
  -- 12 per 2 s: one process done 12-26 s before another, the slowest request 14-18 s where
  -- each waits 6.7 s on average). The others counted are those due soon: not one overdue by
  -- a tenth of a second (its process is slow to ask), nor one due in a quarter of a second or
  -- later (refused until the window's end, it is due a little before the count's end: each
  -- answer sets that end again, by the server's reset).
  local soon = redis.call('ZRANGEBYSCORE', KEYS[5], now - 100, math.min(due, now + 250),
    'WITHSCORES')
  local held = tonumber(redis.call('ZSCORE', since, asker)) or (now - tonumber(ARGV[6]))
  local others, earlier = 0, 0
  for i = 1, #soon, 2 do
    if soon[i] ~= asker then
      others = others + 1
      local began = tonumber(redis.call('ZSCORE', since, soon[i]))
      if began and began < held then
        earlier = earlier + 1
        after = math.max(after or 0, tonumber(soon[i + 1]))
      end
    end
  end
  spare = left - earlier * math.ceil(left / (others + 1))
end
if spare >= cost then
  local taken = math.min(want, spare)
  redis.call('DECRBY', KEYS[1], taken)
  served()
  if silent and KEYS[7] then
    -- In flight, for the fleet's estimate: its answer is counted in this window.
    redis.call('ZADD', KEYS[7], now, asker)
    redis.call('PEXPIRE', KEYS[7], tonumber(ARGV[3]))
  end
  return {1, taken, left - taken}
end
if after and left >= cost then
  -- Kept for others in line: asks again once they have, for what they leave.
  return refuse(0, math.max(after - now, 0) + 10)
end
return refuse(0, math.max(ends, 1))
