-- Takes tokens for the head of a pacer's queue from a shared token bucket, unless the shared
-- gate is closed: one script, so a take and a gate read are one call. The bucket is the
-- limiter's (token_bucket.lua): the same hash, the same arithmetic, so both read one state.
-- KEYS[1]: the bucket, a hash { t = tokens (fractional), at = time of t in µs }
-- KEYS[2]: the gate, a key whose TTL is the pause (close_gate.lua)
-- ARGV[1], ARGV[2]: capacity, refill per second
-- ARGV[3], ARGV[4]: take at least ARGV[3] tokens (the head's cost), up to ARGV[4] (one more
--   for each request queued behind it); nothing unless ARGV[3] are there
-- ARGV[5]: tokens to put back first, as "<how many> <what the bucket held just after they were
--   taken> <when, in its µs as this script returned them>" ('' for none). (One argument: Redis
--   refuses more than 10 fields from a client that has not authenticated, and that refusal
--   would hide the NOAUTH that says why.)
-- Reply: {1, taken, tokens left, µs now} | {0, wait µs for ARGV[3]} | {2, gate ms} (nothing
--   taken) | {3} (ARGV[3] is more than the capacity). Fractions travel as strings.
local capacity = tonumber(ARGV[1])
local per_us = tonumber(ARGV[2]) / 1000000
local cost = tonumber(ARGV[3])
local want = math.max(cost, tonumber(ARGV[4]))

-- The server's clock, never the caller's: callers with skewed clocks share one truth.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])

local state = redis.call('HMGET', KEYS[1], 't', 'at')
local tokens = capacity
local at = now
if state[1] and state[2] then
  -- a server clock that stepped back refills nothing until it passes the last time seen
  at = math.max(now, tonumber(state[2]))
  tokens = math.min(capacity, tonumber(state[1]) + (at - tonumber(state[2])) * per_us)
end
local changed = false

local back, held, taken_at = string.match(ARGV[5], '^(%d+) (%S+) (%d+)$')
back = tonumber(back)
if back and back > 0 then
  -- Had those tokens stayed, the bucket would have refilled over them and stopped at the
  -- capacity: only the room the refill since could not have filled goes back, so a late
  -- give-back never lets more through than the bucket would have.
  local since = math.max(0, at - tonumber(taken_at))
  local room = capacity - tonumber(held) - since * per_us
  back = math.min(back, math.floor(room))
  if back > 0 then
    tokens = math.min(capacity, tokens + back)
    changed = true
  end
end

local reply
local gate = redis.call('PTTL', KEYS[2])
if gate > 0 then
  reply = { 2, gate }
elseif cost > capacity then
  reply = { 3 }
elseif tokens >= cost then
  local taken = math.min(want, math.floor(tokens))
  tokens = tokens - taken
  changed = true
  reply = { 1, taken, string.format('%.17g', tokens), string.format('%.0f', at) }
else
  reply = { 0, string.format('%.3f', (cost - tokens) / per_us) }
end

if changed then
  -- '%.17g' keeps the fraction exactly; Lua numbers would leave as truncated integers
  redis.call('HSET', KEYS[1], 't', string.format('%.17g', tokens), 'at', string.format('%.0f', at))
  -- idle once full again; capped so PEXPIRE never overflows
  local ttl = math.min(math.ceil((capacity - tokens) / per_us / 1000), 1099511627776)
  redis.call('PEXPIRE', KEYS[1], math.max(1, ttl))
end
return reply
