-- How many milliseconds the shared gate stays closed (0 when open or missing).
-- KEYS[1]: the gate
local left = redis.call('PTTL', KEYS[1])
if left < 0 then
  return 0
end
return left
