-- release: give back one hold, and hand the lock to the first waiter.
-- ARGV[1] token, ARGV[2] owner ('' for a plain lock), ARGV[3] '1' when a
-- waiter gives up (leave the queue first; a grant that arrived is released).
-- Returns 1 released, 2 released already (a retried release whose first
-- attempt succeeded), 0 not held.
local token, owner = ARGV[1], ARGV[2]

if ARGV[3] == '1' then
  redis.call('ZREM', queue, token)
  redis.call('HDEL', waiters, token)
end

local value = token
if owner ~= '' then value = 'o:' .. owner end

local released = false
if redis.call('GET', lock) == value then
  if owner == '' then
    redis.call('DEL', lock)
    grant()
    released = true
  elseif redis.call('HDEL', holds, token) == 1 then
    if redis.call('EXISTS', holds) == 0 then -- the owner's last hold
      redis.call('DEL', lock)
      grant()
    end
    released = true
  end
end
if released then
  redis.call('HSET', meta, 'r', token)
  return 1
end
if redis.call('HGET', meta, 'r') == token then return 2 end
return 0
