-- Token bucket: ARGV[1] tokens at most, refilled continuously at ARGV[2] tokens per second;
-- a request takes `cost` tokens. A bucket starts full.
-- KEYS[1]: hash { t = tokens (fractional, as a string), at = time of t in µs }
-- ARGV: capacity, refill per second, cost
-- Reply: { allowed, remaining, reset µs, retry_after µs or "", server seconds, server µs }
local capacity = tonumber(ARGV[1])
local per_us = tonumber(ARGV[2]) / 1000000
local cost = tonumber(ARGV[3])

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

local allowed = 0
local retry_after = ''
if tokens >= cost then
  allowed = 1
  if cost > 0 then
    tokens = tokens - cost
    -- '%.17g' keeps the fraction exactly; Lua numbers would leave as truncated integers
    redis.call('HSET', KEYS[1], 't', string.format('%.17g', tokens), 'at', string.format('%.0f', at))
    -- idle once full again; capped so PEXPIRE never overflows
    local ttl = math.min(math.ceil((capacity - tokens) / per_us / 1000), 1099511627776)
    redis.call('PEXPIRE', KEYS[1], math.max(1, ttl))
  end
elseif cost <= capacity then
  retry_after = string.format('%.3f', (cost - tokens) / per_us)
end

local reset = (capacity - tokens) / per_us
return { allowed, math.floor(tokens), string.format('%.3f', reset), retry_after, time[1], time[2] }
