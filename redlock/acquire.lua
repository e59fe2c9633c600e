-- acquire: one node's part of an attempt.
-- ARGV[1] token, ARGV[2] ttl ms, ARGV[3] owner ('' for a plain lock),
-- ARGV[4] '1' when the caller waits (take the lock only if no live waiter
-- comes before it, else join the queue), ARGV[5] the waiter's score,
-- ARGV[6] its claim window ms, ARGV[7] its attempt number, ARGV[8] its
-- Locker's subscriber id, ARGV[9] the caller's clock in µs (the start of
-- a fresh counter), ARGV[10] and ARGV[11] the stretch of a waiter's entry
-- (k_max and step of lock.lua's enqueue).
-- Returns this node's fence (>= 0) when the hold is ours, else
-- -1 - the holder's PTTL, and for a waiter that queued, the stretch of
-- its entry above it (see lock.lua's queued_reply). Taking the lock, or handing it to a waiter,
-- tells the lock's watchers.
local token, ttl, owner, wait = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4] == '1'
local score = tonumber(ARGV[5])
floor_us = tonumber(ARGV[9])
local value = token
if owner ~= '' then value = 'o:' .. owner end

-- ahead reports whether a live waiter comes before this caller.
local function ahead()
  local head, s = live_head()
  if not head or head == token then return false end
  return s < score or (s == score and head < token)
end

-- the plain path: SET NX PX, as in the single-instance algorithm
if not wait and owner == '' and redis.call('SET', lock, value, 'NX', 'PX', ttl) then
  tell_observers()
  return next_fence(meta)
end

local current = redis.call('GET', lock)
if not current then
  if not (wait and ahead()) then
    redis.call('SET', lock, value, 'PX', ttl)
    local fence = next_fence(meta)
    if owner ~= '' then
      redis.call('DEL', holds)
      redis.call('HSET', holds, token, fence)
      redis.call('PEXPIRE', holds, ttl)
    end
    leave_queue(queue, waiters, token)
    tell_observers()
    return fence
  end
  -- the lock is free with a live waiter ahead: it is that one's
  if grant() then tell_observers() end
elseif current == value then
  if owner == '' then
    -- ours already: a re-sent attempt, or a grant not yet heard of
    extend(ttl, owner)
    leave_queue(queue, waiters, token)
    return tonumber(redis.call('HGET', meta, 'f')) or 0
  end
  local mine = redis.call('HGET', holds, token)
  if mine then
    extend(ttl, owner)
    leave_queue(queue, waiters, token)
    return tonumber(mine)
  end
  if redis.call('EXISTS', holds) == 1 then
    -- reentry: the owner holds the lock; add a hold
    local fence = next_fence(meta)
    redis.call('HSET', holds, token, fence)
    extend(ttl, owner)
    return fence
  end
end
if wait then
  local _, k = enqueue(token, score, tonumber(ARGV[6]), ARGV[7], '1', ARGV[8], owner, tonumber(ARGV[10]), tonumber(ARGV[11]))
  return queued_reply(k)
end
return busy_reply(lock)
