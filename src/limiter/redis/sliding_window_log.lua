-- Sliding window log: at most ARGV[1] units within any window of ARGV[2] µs. One sorted-set
-- member per admitted unit, scored with the time it was admitted.
-- KEYS[1]: sorted set { sequence number -> admission time µs }
-- KEYS[2]: counter handing out unique sequence numbers (members must not collide)
-- ARGV: limit, window (µs), cost
-- Reply: { allowed, remaining, reset µs, retry_after µs or "", server seconds, server µs }
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

-- The server's clock, never the caller's: callers with skewed clocks share one truth.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])

-- An entry admitted at t counts while now < t + window.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now - window))
local used = redis.call('ZCARD', KEYS[1])

local allowed = 0
local retry_after = ''
if used + cost <= limit then
  allowed = 1
  if cost > 0 then
    local last = redis.call('INCRBY', KEYS[2], string.format('%.0f', cost))
    local score = string.format('%.0f', now)
    local batch = {}
    for seq = last - cost + 1, last do
      batch[#batch + 1] = score
      batch[#batch + 1] = string.format('%.0f', seq)
      -- bounded batches: Lua's unpack has a stack limit
      if #batch >= 2000 then
        redis.call('ZADD', KEYS[1], unpack(batch))
        batch = {}
      end
    end
    if #batch > 0 then
      redis.call('ZADD', KEYS[1], unpack(batch))
    end
    used = used + cost
    local ttl = math.ceil(window / 1000)
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
elseif cost <= limit then
  -- the request fits once the (used + cost - limit)-th oldest entry has left the window
  local rank = used + cost - limit - 1
  local entry = redis.call('ZRANGE', KEYS[1], rank, rank, 'WITHSCORES')
  retry_after = string.format('%.3f', tonumber(entry[2]) + window - now)
end

-- the quota is whole again when the newest entry has left the window
local reset = 0
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if newest[2] then
  reset = tonumber(newest[2]) + window - now
end

return { allowed, limit - used, string.format('%.3f', reset), retry_after, time[1], time[2] }
