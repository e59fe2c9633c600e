-- fence: the fencing counter of a lock, shared by the scripts that hand
-- out fences; Go prepends it to them.
--
-- next_fence returns the next fence of the lock whose counter is the hash
-- meta (field f) when fenced is '1', else 0. A fence is
-- max(counter + 1, server time in microseconds), and the counter expires
-- fence_retention ms after its last use, so that Redis keeps no counter
-- for a key that is not used. A fence still never goes back, provided that
-- the server's clock does not step back by more than fence_retention and
-- that a key gets fewer than a million fenced acquisitions a second (so
-- that the counter never runs ahead of the clock): an expired counter
-- comes back at the clock, above every fence it handed out.
local fence_retention = 86400000

local function next_fence(meta, fenced)
  if fenced ~= '1' then return 0 end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local f = (tonumber(redis.call('HGET', meta, 'f')) or 0) + 1
  if f < now then f = now end
  redis.call('HSET', meta, 'f', string.format('%d', f))
  redis.call('PEXPIRE', meta, fence_retention)
  return f
end
