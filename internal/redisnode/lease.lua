-- lease: what a lock's or a hold's lease is on one node, for the scripts
-- of both Redis drivers that renew, refresh, lapse or read it
-- (refresh.lua, renew.lua, lapse.lua, ttl.lua); Go prepends it to them.

-- is_ours reports whether the hold of token (for owner, '' for a plain
-- lock) is still the lock's: the lock key holds the token, or "o:<owner>"
-- with token among the owner's holds.
local function is_ours(lock, holds, token, owner)
  if owner == '' then return redis.call('GET', lock) == token end
  return redis.call('GET', lock) == 'o:' .. owner and redis.call('HEXISTS', holds, token) == 1
end

-- refresh_hold sets the lease of a hold of a semaphore or a read-write
-- lock (see shared.lua): its end becomes now + ttl, and the keys live at
-- least as long. Returns 1, or 0 when the hold is gone.
local function refresh_hold(set, holds, token, ttl)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local score = redis.call('ZSCORE', set, token)
  if not score or tonumber(score) <= now then return 0 end
  redis.call('ZADD', set, now + ttl, token)
  if redis.call('PTTL', set) < ttl then
    redis.call('PEXPIRE', set, ttl)
    redis.call('PEXPIRE', holds, ttl)
  end
  return 1
end

-- refresh sets the lease of a lock we hold (lock key, holds key, token,
-- owner, ttl in ms). A plain lock's lease becomes ttl; an owner's shared
-- lease is extended to at least ttl, never shortened under another hold.
-- A negative ttl is the lease of a hold of a semaphore or a read-write
-- lock, whose keys are its set and holds (refresh_hold): a lock's ttl is
-- never negative, and an owner id may be any string, so the sign is what
-- tells the two apart. Returns 1, or 0 when the lock is not ours.
local function refresh(lock, holds, token, owner, ttl)
  if ttl < 0 then return refresh_hold(lock, holds, token, -ttl) end
  if not is_ours(lock, holds, token, owner) then return 0 end
  if owner == '' then
    redis.call('PEXPIRE', lock, ttl)
  elseif redis.call('PTTL', lock) < ttl then
    redis.call('PEXPIRE', lock, ttl)
    redis.call('PEXPIRE', holds, ttl)
  end
  return 1
end

-- lapse is UnlockAfter's refresh: the lease of the hold of token ends ttl
-- ms from now. A plain lock's lease, and an owner's whose only hold this
-- is, becomes ttl, shorter or longer; an owner's lock with other holds
-- keeps a longer lease, which they need. Returns 1, or 0 when not ours.
local function lapse(lock, holds, token, owner, ttl)
  if ttl < 0 or owner == '' or not is_ours(lock, holds, token, owner) or redis.call('HLEN', holds) > 1 then
    return refresh(lock, holds, token, owner, ttl)
  end
  redis.call('PEXPIRE', lock, ttl)
  redis.call('PEXPIRE', holds, ttl)
  return 1
end
