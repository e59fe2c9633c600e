-- Shared by refresh.lua and renew.lua; Go prepends it to both.
--
-- refresh sets the lease of a lock we hold (lock key, holds key, token,
-- owner, ttl in ms). A plain lock's lease becomes ttl; an owner's shared
-- lease is extended to at least ttl, never shortened under another hold.
-- Returns 1, or 0 when the lock is not ours.
local function refresh(lock, holds, token, owner, ttl)
  if owner == '' then
    if redis.call('GET', lock) == token then
      redis.call('PEXPIRE', lock, ttl)
      return 1
    end
    return 0
  end
  if redis.call('GET', lock) == 'o:' .. owner and redis.call('HEXISTS', holds, token) == 1 then
    if redis.call('PTTL', lock) < ttl then
      redis.call('PEXPIRE', lock, ttl)
      redis.call('PEXPIRE', holds, ttl)
    end
    return 1
  end
  return 0
end
