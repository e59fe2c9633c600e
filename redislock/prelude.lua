-- prelude: this driver's fence counter; Go prepends it, with package
-- redisnode's base.lua, to try.lua and to every script that acquires or
-- releases.
--
-- next_fence returns the next fence of the lock whose counter is the hash
-- meta (field f) when fenced is '1', else 0: the counter plus one, in one
-- HINCRBY. A counter that is not there (never used, or expired) starts at
-- the server's time in microseconds, and expires fence_retention ms later,
-- so that Redis keeps no counter for a key that is not used. A fence still
-- never goes back, provided that the server's clock does not step back by
-- more than fence_retention and that a key gets fewer than a million
-- fenced acquisitions a second on average (so that the counter never runs
-- ahead of the clock): an expired counter comes back at the clock, above
-- every fence it handed out. Only that start asks for the time.
local fence_retention = 86400000

local function next_fence(meta, fenced)
  if fenced ~= '1' then return 0 end
  local f = redis.call('HINCRBY', meta, 'f', 1)
  if f > 1 then return f end
  local t = redis.call('TIME')
  f = tonumber(t[1]) * 1000000 + tonumber(t[2])
  redis.call('HSET', meta, 'f', string.format('%d', f))
  redis.call('PEXPIRE', meta, fence_retention)
  return f
end
