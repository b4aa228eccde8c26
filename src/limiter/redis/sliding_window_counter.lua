-- Sliding window counter: estimate = previous window's count × (1 − elapsed fraction of the
-- current window) + current count; admit when estimate + cost ≤ limit. Windows are aligned to
-- multiples of the window on the Redis server's clock.
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
local elapsed = now - index * window

local state = redis.call('HMGET', KEYS[1], 'w', 'c', 'p')
local stored = tonumber(state[1])
local current, previous = 0, 0
if stored == index then
  current = tonumber(state[2]) or 0
  previous = tonumber(state[3]) or 0
elseif stored == index - 1 then
  previous = tonumber(state[2]) or 0
end

local weight = 1 - elapsed / window
local estimate = previous * weight + current

local allowed = 0
local retry_after = ''
if estimate + cost <= limit then
  allowed = 1
  if cost > 0 then
    current = current + cost
    estimate = estimate + cost
    redis.call('HSET', KEYS[1], 'w', string.format('%.0f', index),
      'c', string.format('%.0f', current), 'p', string.format('%.0f', previous))
    -- the current count still weighs on the estimate until the end of the next window
    redis.call('PEXPIRE', KEYS[1], math.ceil((2 * window - elapsed) / 1000))
  end
elseif cost <= limit then
  local excess = estimate + cost - limit
  local wait = nil
  if previous > 0 then
    -- the previous window's share shrinks by previous / window per µs
    local within = excess * window / previous
    if elapsed + within < window then
      wait = within
    end
  end
  if wait == nil then
    -- next window: the current count becomes the previous one and starts to shrink
    local next_wait = 0
    if current + cost > limit then
      next_wait = (current + cost - limit) * window / current
    end
    wait = window - elapsed + next_wait
  end
  retry_after = string.format('%.3f', wait)
end

local remaining = math.max(0, math.floor(limit - estimate))
local reset = 0
if current > 0 then
  reset = 2 * window - elapsed
elseif previous > 0 then
  reset = window - elapsed
end

return { allowed, remaining, string.format('%.3f', reset), retry_after, time[1], time[2] }
