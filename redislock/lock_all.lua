-- lock_all: one attempt at several locks at once, all or none, for one
-- owner. ARGV[1] ttl in ms, ARGV[2] owner ('' for plain locks), ARGV[3]
-- '1' for fenced acquisitions, ARGV[3+i] the token of lock i. Every lock
-- is taken as acquire.lua's unfair try takes it: a free lock, or the
-- owner's lock (a reentry), or a hold of ours that an earlier run of this
-- very call took (the call was sent twice).
-- Returns {0, fence of lock 1, ..., fence of lock n} when every lock is
-- ours (a fence is 0 when not fenced), else {i, -1 - PTTL of lock i} for
-- the first busy lock i, and nothing changed.
-- From prelude.lua: next_fence; from base.lua: busy_reply; from lock.lua: the keys,
-- tell_observers; from all.lua: use.
local ttl, owner, fenced = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local n = #KEYS / 6
local value = 'o:' .. owner

-- First look, then write: a busy lock leaves every lock as it was.
local how = {}
for i = 1, n do
  use(i)
  local token = ARGV[3 + i]
  local current = redis.call('GET', lock)
  if not current then
    how[i] = 'free'
  elseif owner == '' and current == token then
    how[i] = 'ours'
  elseif owner ~= '' and current == value and redis.call('HEXISTS', holds, token) == 1 then
    how[i] = 'ours'
  elseif owner ~= '' and current == value and redis.call('EXISTS', holds) == 1 then
    how[i] = 'enter'
  else
    return {i, busy_reply(lock)}
  end
end

local out = {0}
for i = 1, n do
  use(i)
  local token = ARGV[3 + i]
  local fence
  if how[i] == 'ours' then
    if owner ~= '' then
      fence = tonumber(redis.call('HGET', holds, token))
    elseif fenced == '1' then
      fence = tonumber(redis.call('HGET', meta, 'f'))
    else
      fence = 0
    end
  else
    fence = next_fence(meta, fenced)
    if owner == '' then
      redis.call('SET', lock, token, 'PX', ttl)
    elseif how[i] == 'free' then
      redis.call('SET', lock, value, 'PX', ttl)
      redis.call('DEL', holds)
      redis.call('HSET', holds, token, fence)
      redis.call('PEXPIRE', holds, ttl)
    else
      redis.call('HSET', holds, token, fence)
      if redis.call('PTTL', lock) < ttl then
        redis.call('PEXPIRE', lock, ttl)
        redis.call('PEXPIRE', holds, ttl)
      end
    end
    if how[i] == 'free' then tell_observers() end
  end
  out[i + 1] = fence
end
return out
