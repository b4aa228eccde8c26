-- Closes a shared "quota spent" gate for ARGV[1] milliseconds; a longer pause already there
-- wins. A TTL, not a timestamp: the callers' clocks never enter Redis.
-- KEYS[1]: the gate
local pause = tonumber(ARGV[1])
if pause and pause > 0 and redis.call('PTTL', KEYS[1]) < pause then
  redis.call('SET', KEYS[1], '1', 'PX', pause)
end
return 1
