-- Fixed window: at most ARGV[1] units per window; windows are aligned to multiples of the
-- window on the Redis server's clock.
-- KEYS[1]: hash { w = index of the window counted, n = units taken in it }
-- ARGV: limit, window (µs), cost
-- Reply: { allowed, remaining, reset µs, retry_after µs or "", server seconds, server µs }
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

-- The server's clock, never the caller's: callers with skewed clocks share one truth.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])

local index = math.floor(now / window)
local state = redis.call('HMGET', KEYS[1], 'w', 'n')
local stored = tonumber(state[1])
local used = 0
-- a server clock that stepped back keeps counting in the window already reached
if stored ~= nil and stored >= index then
  index = stored
  used = tonumber(state[2]) or 0
end
local window_end = (index + 1) * window - now

local allowed = 0
local retry_after = ''
if used + cost <= limit then
  allowed = 1
  if cost > 0 then
    used = used + cost
    -- '%.0f' because redis.call turns Lua numbers into 14-digit strings
    redis.call('HSET', KEYS[1], 'w', string.format('%.0f', index), 'n', string.format('%.0f', used))
    redis.call('PEXPIRE', KEYS[1], math.ceil(window_end / 1000))
  end
elseif cost <= limit then
  retry_after = string.format('%.3f', window_end)
end

local reset = 0
if used > 0 then
  reset = window_end
end

return { allowed, limit - used, string.format('%.3f', reset), retry_after, time[1], time[2] }
