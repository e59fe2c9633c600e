-- try: the plain, ownerless, unfair attempt: SET NX PX as in the
-- single-instance algorithm, and the fence. Keys and replies as acquire.lua
-- (KEYS[1] lock, KEYS[2] meta; ARGV[1] token, ARGV[2] ttl in ms).
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('HINCRBY', KEYS[2], 'f', 1)
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then pttl = 0 end
return -1 - pttl
