-- lapse: UnlockAfter's token-checked PEXPIRE on one node. KEYS[1] the
-- lock, or a read-write lock's set; KEYS[3] its holds. ARGV[1] token,
-- ARGV[2] owner, ARGV[3] the lapse in ms (negative for a read or write
-- hold, whose lease is its own). A plain lock's lease, and an owner's
-- whose only hold this is, becomes the lapse; an owner's lock with other
-- holds keeps a longer lease, which they need. Returns 1, or 0 when not
-- ours.
-- From redisnode's lease.lua: is_ours, refresh.
local lock, holds, token, owner, ttl = KEYS[1], KEYS[3], ARGV[1], ARGV[2], tonumber(ARGV[3])
if ttl < 0 or owner == '' or not is_ours(lock, holds, token, owner) or redis.call('HLEN', holds) > 1 then
  return refresh(lock, holds, token, owner, ttl)
end
redis.call('PEXPIRE', lock, ttl)
redis.call('PEXPIRE', holds, ttl)
return 1
