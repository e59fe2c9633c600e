-- unlock_all: releases several holds of one owner at once, each as
-- release.lua releases it, and hands each lock that becomes free to its
-- first waiter. ARGV[1] owner ('' for plain locks), ARGV[1+i] the token of
-- lock i. Returns one reply per lock, release.lua's: 1 released, 0 the
-- hold is gone, -1 another party holds the lock.
-- From lock.lua: the keys, grant, tell_observers; from all.lua: use.
local owner = ARGV[1]
local out = {}
for i = 1, #KEYS / 6 do
  use(i)
  local token = ARGV[1 + i]
  local value = token
  if owner ~= '' then value = 'o:' .. owner end
  local current = redis.call('GET', lock)
  if current ~= value then
    out[i] = current and -1 or 0
  elseif owner ~= '' and redis.call('HDEL', holds, token) == 0 then
    out[i] = 0
  elseif owner ~= '' and redis.call('EXISTS', holds) == 1 then
    out[i] = 1 -- the owner holds the lock still
  else
    redis.call('DEL', lock)
    grant()
    tell_observers()
    out[i] = 1
  end
end
return out
