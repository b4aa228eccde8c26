-- Takes from what the processes learned of a key's window, unless the shared gate is closed:
-- at least ARGV[1] units (the head's cost), up to ARGV[2] (one more for each request queued
-- behind it).
-- KEYS[1]: what is left in the current window (a count whose TTL is the window's end)
-- KEYS[2]: the quota per window (a hash: limit, window in ms)
-- KEYS[3]: the gate, a key whose TTL is the pause (close_gate.lua)
-- Returns {1, taken, left} when taken (left -1: nothing known, the server's answers will
-- tell, and all ARGV[2] go), {0, wait in ms} when the window is spent, {2, gate ms} when the
-- gate is closed (nothing taken). TTLs only: the callers' clocks never enter Redis.
local cost = tonumber(ARGV[1])
local want = math.max(cost, tonumber(ARGV[2]))
local gate = redis.call('PTTL', KEYS[3])
if gate > 0 then
  return {2, gate}
end
local left = tonumber(redis.call('GET', KEYS[1]))
if not left then
  local limit = tonumber(redis.call('HGET', KEYS[2], 'limit'))
  local window = tonumber(redis.call('HGET', KEYS[2], 'window'))
  if not limit or not window or window <= 0 or cost > limit then
    return {1, want, -1}
  end
  -- The last window ended: a new one, with its whole quota, until a response says when it ends.
  local taken = math.min(want, limit)
  redis.call('SET', KEYS[1], limit - taken, 'PX', window)
  return {1, taken, limit - taken}
end
if left >= cost then
  local taken = math.min(want, left)
  redis.call('DECRBY', KEYS[1], taken)
  return {1, taken, left - taken}
end
local wait = redis.call('PTTL', KEYS[1])
if wait <= 0 then
  wait = 1
end
return {0, wait}
