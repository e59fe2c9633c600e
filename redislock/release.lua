-- release, second part: hand the lock to the first waiter, and the
-- releases of an owner's hold or of a waiter that gives up.
-- From release_head.lua: token, owner, giveup, deleted; from base.lua:
-- leave_queue; from lock.lua: the keys, grant, tell_observers.
if deleted then
  grant()
  tell_observers()
  return 1
end

if giveup then leave_queue(queue, waiters, token) end

local value = token
if owner ~= '' then value = 'o:' .. owner end
local current = redis.call('GET', lock)
if current ~= value then
  if current then return -1 end
  return 0
end
if owner ~= '' then
  if redis.call('HDEL', holds, token) == 0 then return 0 end
  if redis.call('EXISTS', holds) == 1 then
    return 1 -- the owner holds the lock still
  end
end
redis.call('DEL', lock)
grant()
tell_observers()
return 1
