-- refresh: set the lease of a lock we hold.
-- KEYS[1] lock, KEYS[2] holds; ARGV[1] token, ARGV[2] owner, ARGV[3] ttl ms.
-- A plain lock's lease becomes ttl; an owner's shared lease is extended to
-- at least ttl, never shortened under another hold. Returns 1, or 0 when
-- the lock is not ours.
local token, owner, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
if owner == '' then
  if redis.call('GET', KEYS[1]) == token then
    redis.call('PEXPIRE', KEYS[1], ttl)
    return 1
  end
  return 0
end
if redis.call('GET', KEYS[1]) == 'o:' .. owner and redis.call('HEXISTS', KEYS[2], token) == 1 then
  if redis.call('PTTL', KEYS[1]) < ttl then
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
  return 1
end
return 0
