-- release: give back one hold, and hand the lock to the first waiter.
-- ARGV[1] token, ARGV[2] owner ('' for a plain lock), ARGV[3] '1' when a
-- waiter gives up (leave the queue first; a grant that arrived is released).
-- Returns 1 released, 0 not held. It writes nothing else: a retried release
-- is recognised by the client (see lock.Unlock).
local token, owner = ARGV[1], ARGV[2]

if ARGV[3] == '1' then
  redis.call('ZREM', queue, token)
  redis.call('HDEL', waiters, token)
end

if owner == '' then
  if redis.call('GET', lock) ~= token then return 0 end
elseif redis.call('GET', lock) ~= 'o:' .. owner or redis.call('HDEL', holds, token) == 0 then
  return 0
elseif redis.call('EXISTS', holds) == 1 then
  return 1 -- the owner holds the lock still
end
redis.call('DEL', lock)
grant()
return 1
