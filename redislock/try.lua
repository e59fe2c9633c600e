-- try: the fenced, ownerless, unfair attempt: SET NX PX as in the
-- single-instance algorithm, and the fence. (Without a fence the attempt is
-- the bare SET NX PX GET, sent without a script.) A re-sent attempt finds
-- its own token: the lock is ours, with the fence its first run made.
-- KEYS[1] lock, KEYS[2] meta; ARGV[1] token, ARGV[2] ttl in ms.
-- Returns the fence when the lock is ours, else -1 - holder's PTTL.
-- From prelude.lua: next_fence; from base.lua: busy_reply.
local current = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2], 'GET')
if not current then
  return next_fence(KEYS[2], '1')
end
if current == ARGV[1] then
  return tonumber(redis.call('HGET', KEYS[2], 'f'))
end
return busy_reply(KEYS[1])
