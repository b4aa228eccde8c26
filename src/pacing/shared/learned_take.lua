-- Takes ARGV[1] units from what the processes learned of a key's window.
-- KEYS[1]: what is left in the current window (a count whose TTL is the window's end)
-- KEYS[2]: the quota per window (a hash: limit, window in ms)
-- Returns {1, left} when taken (left -1: nothing known, the server's answers will tell),
-- {0, wait in ms} when the window is spent. TTLs only: the callers' clocks never enter Redis.
local cost = tonumber(ARGV[1])
local left = tonumber(redis.call('GET', KEYS[1]))
if not left then
  local limit = tonumber(redis.call('HGET', KEYS[2], 'limit'))
  local window = tonumber(redis.call('HGET', KEYS[2], 'window'))
  if not limit or not window or window <= 0 or cost > limit then
    return {1, -1}
  end
  -- The last window ended: a new one, with its whole quota, until a response says when it ends.
  redis.call('SET', KEYS[1], limit - cost, 'PX', window)
  return {1, limit - cost}
end
if left >= cost then
  redis.call('DECRBY', KEYS[1], cost)
  return {1, left - cost}
end
local wait = redis.call('PTTL', KEYS[1])
if wait <= 0 then
  wait = 1
end
return {0, wait}
