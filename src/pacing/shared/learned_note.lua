-- Shares what one process learned of a key's quota.
-- KEYS[1]: what is left in the current window; KEYS[2]: the quota per window (hash);
-- KEYS[3]: the probe (learned_take.lua)
-- ARGV[1], ARGV[2]: left, and the window's end in ms from now ('' when not stated)
-- ARGV[3], ARGV[4]: the quota per window, and the window in ms ('' when not known)
-- ARGV[5]: how long the quota is kept without news, in ms
-- ARGV[6]: '1' when the answer stated nothing at all (a silent server)
-- Any answer ends a probe that is out: if it was not the probe's, the next request to come
-- goes as one (one more probe, not a wait for one whose answer said nothing).
redis.call('DEL', KEYS[3])
local left, ends = tonumber(ARGV[1]), tonumber(ARGV[2])
local limit, window = tonumber(ARGV[3]), tonumber(ARGV[4])
if limit and window and window > 0 then
  redis.call('HSET', KEYS[2], 'limit', limit, 'window', window)
  redis.call('HDEL', KEYS[2], 'silent')
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[5]))
elseif ARGV[6] == '1' then
  redis.call('HSET', KEYS[2], 'silent', '1')
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[5]))
end
if left and ends and ends > 0 then
  local known = tonumber(redis.call('GET', KEYS[1]))
  local ttl = redis.call('PTTL', KEYS[1])
  if not known or ttl <= 0 then
    redis.call('SET', KEYS[1], left, 'PX', ends)
    return 1
  end
  -- Which window the answer speaks of, by its end: ends stated in whole seconds (rounded up)
  -- differ by up to a second within one window, and windows end a window apart.
  window = window or tonumber(redis.call('HGET', KEYS[2], 'window')) or 1000
  local slack = math.min(1000, math.floor(window / 2))
  if ends + slack < ttl then
    -- An answer of a window that has ended since (it came late): it says nothing of this one.
    return 0
  elseif ends > ttl + slack then
    -- A window that began since: the count known is the last one's.
    redis.call('SET', KEYS[1], left, 'PX', ends)
  elseif left < known then
    -- Others may have taken more since that answer left the server: the least count wins,
    -- and the soonest end.
    redis.call('SET', KEYS[1], left, 'PX', math.min(ttl, ends))
  elseif ttl > ends then
    -- The window ends sooner than thought (a reset stated more finely).
    redis.call('PEXPIRE', KEYS[1], ends)
  end
end
return 1
