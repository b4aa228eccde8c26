-- Shares what one process learned of a key's quota.
-- KEYS[1]: what is left in the current window; KEYS[2]: the quota per window (hash);
-- KEYS[3]: the probe (learned_take.lua)
-- ARGV[1], ARGV[2]: left, and the window's end in ms from now ('' when not stated)
-- ARGV[3], ARGV[4]: the quota per window, and the window in ms ('' when not known)
-- ARGV[5]: how long the quota is kept without news, in ms
-- ARGV[6]: '1' when the answer stated nothing at all (a silent server)
-- KEYS[4], KEYS[5], KEYS[6] (optional): the gate (close_gate.lua), a silent server's
--          estimate shared (a hash) and the requests in flight (learned_take.lua)
-- ARGV[7]: '1' when the answer was a refusal that stated nothing at all
-- ARGV[8]: the request's id (its take's)
-- Any answer ends a probe that is out: if it was not the probe's, the next request to come
-- goes as one (one more probe, not a wait for one whose answer said nothing).
-- Returns {fleet, gate ms}: fleet 1 when the estimate shared paces the key (a silent
-- server), and the pause it closed the gate for (0: none).
redis.call('DEL', KEYS[3])
local refused = ARGV[7] == '1'
if KEYS[5] and (refused or ARGV[6] == '1') and (ARGV[6] == '1' or redis.call('HGET', KEYS[2], 'silent')) then
  -- A silent server, learned by all the processes as one (learned_take.lua paces by it):
  -- what all of them were admitted between two refusals is the quota per window; the pause
  -- after the first refusal grows until a probe is admitted, which bounds the window; each
  -- window's first request goes alone at the midpoint of the window known too short and the
  -- one known enough, until they are a sixteenth apart.
  local FIRST_PAUSE, GROWTH, LONGEST, PRESSED = 250, 1.5, 30000, 600000
  redis.call('HSET', KEYS[2], 'silent', '1')
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[5]))
  local S, F, G = KEYS[5], KEYS[6], KEYS[4]
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local asker = ARGV[8]
  local sent = tonumber(redis.call('ZSCORE', F, asker))
  redis.call('ZREM', F, asker)
  local f = redis.call('HMGET', S, 'q', 'w', 'short', 'start', 'admitted', 'probing', 'pause',
    'rafter', 'probe', 'ptime', 'wave', 'cut')
  local q, w, short, start = tonumber(f[1]), tonumber(f[2]), tonumber(f[3]) or 0, tonumber(f[4])
  local admitted, probing, pause = tonumber(f[5]) or 0, f[6] == '1', tonumber(f[7]) or FIRST_PAUSE
  local rafter, probe, ptime = tonumber(f[8]) or 0, f[9], tonumber(f[10])
  local wave, cut = tonumber(f[11]) or 0, tonumber(f[12])
  if not start then
    start = sent or now
  end
  local is_probe = probe ~= nil and probe == asker and ptime ~= nil
  local function next_try()
    local gap = w - short
    if gap > math.max(math.floor(w / 16), 2) then
      return short + math.floor(gap / 2)
    end
    return w
  end
  local function keep(gate)
    redis.call('HSET', S, 'short', short, 'start', start, 'admitted', admitted,
      'probing', probing and '1' or '0', 'pause', pause, 'rafter', rafter, 'wave', wave)
    if q then redis.call('HSET', S, 'q', q) end
    if w then redis.call('HSET', S, 'w', w) end
    if cut then redis.call('HSET', S, 'cut', cut) end
    if is_probe then redis.call('HDEL', S, 'probe', 'ptime') end
    redis.call('PEXPIRE', S, tonumber(ARGV[5]))
    if gate > 0 and redis.call('PTTL', G) < gate then
      redis.call('SET', G, '1', 'PX', gate)
    end
    return {1, gate}
  end
  if not refused then
    if is_probe and (probing or w) then
      if probing then
        -- The server admits again: the window is bounded, and a new one began with this
        -- probe. Answers of the measured window that came after the refusal count too.
        w = math.max(1, ptime - start)
        short = math.min(rafter, w)
        q = math.max(q or 1, admitted)
        probing = false
      elseif ptime - start < w and admitted >= q then
        -- A window's first request, sent early (at a midpoint), admitted after a window that
        -- spent its whole quota: the window is no longer than that.
        w = math.max(ptime - start, short)
      end
      start, admitted, cut = ptime, 1, nil
      local ttl = math.max(1, ptime + next_try() - now)
      redis.call('SET', KEYS[1], math.max(q - 1, 0), 'PX', ttl)
    elseif (sent or now) >= start then
      admitted = admitted + 1
      if cut == start and q and admitted > q then
        -- The window cut is admitting more than it had when refused: its quota is that.
        q = admitted
      end
    end
    return keep(0)
  end
  if not is_probe and (sent or 0) < wave then
    -- Sent before the last refusal: the same news again.
    return {1, math.max(redis.call('PTTL', G), 0)}
  end
  wave = now
  local gate
  if not q then
    -- The first refusal: what all were admitted since the first answer is the quota.
    q = math.max(admitted, 1)
    probing, rafter = true, (sent or now) - start
    gate, pause = FIRST_PAUSE, math.floor(FIRST_PAUSE * GROWTH)
  elseif probing then
    if is_probe then
      -- A probe refused: the window has not ended yet; the next probe goes later, up to
      -- LONGEST, and past it up to PRESSED once a probe sent LONGEST or more after the last
      -- refusal was refused too (as the silent model's probes.rs: a window longer than
      -- LONGEST that each refusal begins again refuses every probe sent at LONGEST).
      local most = (ptime - start - rafter >= LONGEST) and PRESSED or LONGEST
      rafter = ptime - start
      gate, pause = pause, math.min(math.floor(pause * GROWTH), most)
    else
      gate = math.max(redis.call('PTTL', G), 1)
    end
  elseif is_probe then
    local into = ptime - start
    if into < w then
      -- Sent early, at a midpoint: the window is longer. The next midpoint is tried.
      short = math.max(short, into)
      gate = start + next_try() - now
    else
      -- Sent at the estimated end: the window is longer than thought; measured again.
      probing, rafter = true, into
      gate, pause = FIRST_PAUSE, math.floor(FIRST_PAUSE * GROWTH)
    end
  else
    -- Refused inside a counted window: fewer per window than thought. What it admitted
    -- is the quota (its answers still coming raise it); nothing more goes until its end.
    q = math.max(1, math.min(q, admitted))
    cut = start
    gate = redis.call('PTTL', KEYS[1])
    if gate <= 0 then
      gate = start + next_try() - now
    end
  end
  if probing then
    redis.call('DEL', KEYS[1])
  elseif redis.call('PTTL', KEYS[1]) > 0 then
    redis.call('SET', KEYS[1], 0, 'KEEPTTL')
  end
  return keep(math.max(gate, 1))
end
local left, ends = tonumber(ARGV[1]), tonumber(ARGV[2])
local limit, window = tonumber(ARGV[3]), tonumber(ARGV[4])
if limit and window and window > 0 then
  redis.call('HSET', KEYS[2], 'limit', limit, 'window', window)
  redis.call('HDEL', KEYS[2], 'silent')
  if KEYS[5] then
    -- A stated quota replaces the estimate.
    redis.call('DEL', KEYS[5])
  end
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
    return {0, 0}
  end
  -- Which window the answer speaks of, by its end: ends stated in whole seconds (rounded up)
  -- differ by up to a second within one window, and windows end a window apart. A window
  -- nobody stated takes the whole second: the first answer of each of rate-limiter-flexible's
  -- windows rounds its end up (a Retry-After of exactly 2 s reads as whole seconds), the others
  -- state it finely, up to a second sooner; taken for late answers of an ended window, they
  -- left every window of 2 s a second longer.
  window = window or tonumber(redis.call('HGET', KEYS[2], 'window'))
  local slack = window and math.min(1000, math.floor(window / 2)) or 1000
  if ends + slack < ttl then
    -- An answer of a window that has ended since (it came late): it says nothing of this one.
    return {0, 0}
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
return {0, 0}
