-- acquire: one attempt to take the lock, or to confirm a grant.
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] owner ('' for a plain lock),
-- ARGV[4] mode: 0 try, 1 fair try, 2 wait, 3 fair wait (wait = join the
-- queue when busy), ARGV[5] claim window in ms of a waiter's queue entry,
-- ARGV[6] the number of this attempt of the waiter, ARGV[7] '1' for a
-- fenced acquisition, ARGV[8] the subscriber id of the waiter's Locker
-- ('' when it polls), ARGV[9] and ARGV[10] the stretch of a waiter's entry
-- (k_max and step of lock.lua's enqueue; absent: none).
-- Returns the fence (0 when not fenced) when the lock is ours, else
-- -1 - holder's PTTL, and for an attempt that queued, the stretch of its
-- entry above it (see lock.lua's queued_reply).
-- From prelude.lua: next_fence; from base.lua: busy_reply, leave_queue;
-- from lock.lua: the keys, enqueue, queued_reply, live_head, grant,
-- tell_observers.
local token, ttl, owner, mode, claim = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local fenced = ARGV[7]
local fair, wait = mode % 2 == 1, mode >= 2

local function take(fence)
  if wait then leave_queue(queue, waiters, token) end
  return fence
end

-- taken is take for an attempt that made us the holder of a free lock:
-- the lock changed hands, which its watchers hear of.
local function taken(fence)
  tell_observers()
  return take(fence)
end

-- Is someone other than us first in the queue and still alive?
local function queued_ahead()
  local head = live_head()
  return head ~= nil and head ~= token
end

if owner == '' and not fair then
  -- the plain path: SET NX PX, as in the single-instance algorithm
  if redis.call('SET', lock, token, 'NX', 'PX', ttl) then
    return taken(next_fence(meta, fenced))
  end
end

local value = token
if owner ~= '' then value = 'o:' .. owner end
local current = redis.call('GET', lock)

if not current then
  if fair and queued_ahead() then
    if grant() then tell_observers() end -- the lock expired with waiters queued: wake the first one
  else
    redis.call('SET', lock, value, 'PX', ttl)
    local fence = next_fence(meta, fenced)
    if owner ~= '' then
      redis.call('DEL', holds)
      redis.call('HSET', holds, token, fence)
      redis.call('PEXPIRE', holds, ttl)
    end
    return taken(fence)
  end
elseif current == value then
  if owner == '' then
    -- granted to us while we waited: confirm
    redis.call('PEXPIRE', lock, ttl)
    if fenced == '1' then return take(tonumber(redis.call('HGET', meta, 'f'))) end
    return take(0)
  end
  local mine = redis.call('HGET', holds, token)
  if mine then
    extend(ttl, owner) -- a grant to us, confirmed now
    return take(tonumber(mine))
  end
  if redis.call('EXISTS', holds) == 1 then
    -- reentry: the owner holds the lock already; add a hold
    local fence = next_fence(meta, fenced)
    redis.call('HSET', holds, token, fence)
    extend(ttl, owner)
    return take(fence)
  end
end

if wait then
  local score -- arrival order: one past the last in the queue
  if not redis.call('ZSCORE', queue, token) then
    score = (tonumber(redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')[2]) or 0) + 1
  end
  local k
  claim, k = enqueue(token, score, claim, ARGV[6], fenced, ARGV[8], owner, tonumber(ARGV[9]), tonumber(ARGV[10]))
  -- The release of a plain lock learns that someone waits from the
  -- observed key, which it reads with the lock: it lives as long as the
  -- queue (a watcher's 30s lease is never shortened).
  if redis.call('PTTL', observed) < 2 * claim then
    redis.call('SET', observed, '1', 'PX', 2 * claim)
  end
  return queued_reply(k)
end
return busy_reply(lock)
