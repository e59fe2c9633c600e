-- Shared by refresh.lua, renew.lua and ttl.lua; Go prepends it to them.

-- is_ours reports whether the hold of token (for owner, '' for a plain
-- lock) is still the lock's: the lock key holds the token, or "o:<owner>"
-- with token among the owner's holds.
local function is_ours(lock, holds, token, owner)
  if owner == '' then return redis.call('GET', lock) == token end
  return redis.call('GET', lock) == 'o:' .. owner and redis.call('HEXISTS', holds, token) == 1
end

-- refresh sets the lease of a lock we hold (lock key, holds key, token,
-- owner, ttl in ms). A plain lock's lease becomes ttl; an owner's shared
-- lease is extended to at least ttl, never shortened under another hold.
-- Returns 1, or 0 when the lock is not ours.
local function refresh(lock, holds, token, owner, ttl)
  if not is_ours(lock, holds, token, owner) then return 0 end
  if owner == '' then
    redis.call('PEXPIRE', lock, ttl)
  elseif redis.call('PTTL', lock) < ttl then
    redis.call('PEXPIRE', lock, ttl)
    redis.call('PEXPIRE', holds, ttl)
  end
  return 1
end
