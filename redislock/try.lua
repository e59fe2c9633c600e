-- try: the fenced, ownerless, unfair attempt: SET NX PX as in the
-- single-instance algorithm, and the fence. (Without a fence the attempt is
-- the bare SET NX PX GET, sent without a script.) A re-sent attempt finds
-- its own token: the lock is ours, with the fence its first run made.
-- KEYS[1] lock, KEYS[2] meta; ARGV[1] token, ARGV[2] ttl in ms.
-- Returns the fence when the lock is ours, else -1 - holder's PTTL.
local current = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2], 'GET')
if not current then
  return next_fence(KEYS[2], '1')
end
if current == ARGV[1] then
  return tonumber(redis.call('HGET', KEYS[2], 'f'))
end
local pttl = redis.call('PTTL', KEYS[1])
-- 0 means unknown (a key without TTL); a lease in its last millisecond
-- is 1, so that the waiter looks again at once, not after its interval
if pttl < 0 then pttl = 0 elseif pttl == 0 then pttl = 1 end
return -1 - pttl
