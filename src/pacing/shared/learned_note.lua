-- Shares what one process learned of a key's quota.
-- KEYS[1]: what is left in the current window; KEYS[2]: the quota per window (hash)
-- ARGV[1], ARGV[2]: left, and the window's end in ms from now ('' when not stated)
-- ARGV[3], ARGV[4]: the quota per window, and the window in ms ('' when not known)
-- ARGV[5]: how long the quota is kept without news, in ms
local left, ends = tonumber(ARGV[1]), tonumber(ARGV[2])
local limit, window = tonumber(ARGV[3]), tonumber(ARGV[4])
if limit and window and window > 0 then
  redis.call('HSET', KEYS[2], 'limit', limit, 'window', window)
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[5]))
end
if left and ends and ends > 0 then
  local known = tonumber(redis.call('GET', KEYS[1]))
  -- Others may have taken more since that answer left the server: the least count wins.
  if not known or left < known then
    local ttl = redis.call('PTTL', KEYS[1])
    if ttl > 0 and ttl < ends then
      ends = ttl
    end
    redis.call('SET', KEYS[1], left, 'PX', ends)
  elseif redis.call('PTTL', KEYS[1]) > ends then
    -- The window ends sooner than thought (a reset stated more finely).
    redis.call('PEXPIRE', KEYS[1], ends)
  end
end
return 1
