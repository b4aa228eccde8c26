-- Sliding window log: at most ARGV[1] units within any window of ARGV[2] µs. One sorted-set
-- member per admitted request, scored with its admission time; the member carries its cost.
-- KEYS[1]: sorted set { "<sequence>:<cost>" -> admission time µs }
-- KEYS[2]: hash { seq = last sequence number handed out, used = sum of the logged costs }
-- ARGV: limit, window (µs), cost
-- Reply: { allowed, remaining, reset µs, retry_after µs or "", server seconds, server µs }
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

-- The server's clock, never the caller's: callers with skewed clocks share one truth.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])

local function cost_of(member)
  return tonumber(string.match(member, ':(%d+)$')) or 0
end

local used = 0
if redis.call('ZCARD', KEYS[1]) > 0 then
  used = tonumber(redis.call('HGET', KEYS[2], 'used')) or 0
  -- An entry admitted at t counts while now < t + window; drop (and uncount) the others.
  local horizon = string.format('%.0f', now - window)
  local leaving = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', horizon)
  if #leaving > 0 then
    for _, member in ipairs(leaving) do
      used = used - cost_of(member)
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', horizon)
    used = math.max(0, used)
    redis.call('HSET', KEYS[2], 'used', string.format('%.0f', used))
  end
end

local allowed = 0
local retry_after = ''
if used + cost <= limit then
  allowed = 1
  if cost > 0 then
    local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
    -- a server clock that stepped back logs at the newest time seen, never earlier
    local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
    local at = now
    if newest[2] then
      at = math.max(now, tonumber(newest[2]))
    end
    -- '%.0f' because redis.call turns Lua numbers into 14-digit strings
    redis.call('ZADD', KEYS[1], string.format('%.0f', at),
      string.format('%d:%.0f', seq, cost))
    used = used + cost
    redis.call('HSET', KEYS[2], 'used', string.format('%.0f', used))
    local ttl = math.ceil((at + window - now) / 1000)
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
elseif cost <= limit then
  -- the oldest entries leave first: wait until enough cost has left with them
  local must_free = used - (limit - cost)
  local freed = 0
  local start = 0
  while retry_after == '' do
    local batch = redis.call('ZRANGE', KEYS[1], start, start + 99, 'WITHSCORES')
    if #batch == 0 then
      break
    end
    for i = 1, #batch, 2 do
      freed = freed + cost_of(batch[i])
      if freed >= must_free then
        retry_after = string.format('%.3f', math.max(0, tonumber(batch[i + 1]) + window - now))
        break
      end
    end
    start = start + 100
  end
end

-- the quota is whole again when the newest entry has left the window
local reset = 0
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if newest[2] then
  reset = math.max(0, tonumber(newest[2]) + window - now)
end

return { allowed, limit - used, string.format('%.3f', reset), retry_after, time[1], time[2] }
