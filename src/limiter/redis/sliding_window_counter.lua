-- Sliding window counter: estimate = previous window's count × (1 − elapsed fraction of the
-- current window) + current count; admit when estimate + cost ≤ limit. Windows are aligned to
-- multiples of the window on the Redis server's clock. The estimate is kept scaled by the
-- window (an integer), so comparisons are exact while the products stay below 2^53.
-- KEYS[1]: hash { w = index of the current window, c = its count, p = the previous one's }
-- ARGV: limit, window (µs), cost
-- Reply: { allowed, remaining, reset µs, retry_after µs or "", server seconds, server µs }
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

-- The server's clock, never the caller's: callers with skewed clocks share one truth.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])

local index = math.floor(now / window)
local state = redis.call('HMGET', KEYS[1], 'w', 'c', 'p')
local stored = tonumber(state[1])
local current, previous = 0, 0
if stored ~= nil and stored >= index then
  -- same window, or a server clock that stepped back: keep counting in the one reached
  index = stored
  current = tonumber(state[2]) or 0
  previous = tonumber(state[3]) or 0
elseif stored == index - 1 then
  previous = tonumber(state[2]) or 0
end
local elapsed = math.min(window, math.max(0, now - index * window))

-- estimate × window
local function scaled(count)
  return previous * (window - elapsed) + count * window
end
local budget = limit * window

local allowed = 0
local retry_after = ''
if scaled(current + cost) <= budget then
  allowed = 1
  if cost > 0 then
    current = current + cost
    redis.call('HSET', KEYS[1], 'w', string.format('%.0f', index),
      'c', string.format('%.0f', current), 'p', string.format('%.0f', previous))
    -- the current count still weighs on the estimate until the end of the next window
    redis.call('PEXPIRE', KEYS[1], math.ceil((2 * window - elapsed) / 1000))
  end
elseif cost <= limit then
  -- the first point e into a window where fading × (window − e) ≤ room × window
  local function first_fit(fading, room)
    return window - math.floor(room * window / math.max(fading, 1))
  end
  local wait
  if current + cost <= limit then
    -- later in this window, once enough of the previous window has faded
    wait = math.max(0, first_fit(previous, limit - current - cost) - elapsed)
  else
    -- in the next window, once enough of this window's count has faded
    wait = window - elapsed + first_fit(current, limit - cost)
  end
  retry_after = string.format('%.3f', wait)
end

local remaining = math.max(0, math.floor((budget - scaled(current)) / window))
local reset = 0
if current > 0 then
  reset = 2 * window - elapsed
elseif previous > 0 then
  reset = window - elapsed
end

return { allowed, remaining, string.format('%.3f', reset), retry_after, time[1], time[2] }
