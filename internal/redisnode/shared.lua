-- Shared by the scripts of semaphores and read-write locks of both Redis
-- drivers (their acquire and release, downgrade.lua); Go prepends it to
-- them, after the driver's fence counter, which defines next_fence(meta,
-- fenced), and base.lua. Every hold is a lease
-- of its own:
--
-- KEYS[1] set       zset: hold token -> end of its lease (server time, ms);
--                   a hold whose score is not past now has ended
-- KEYS[2] meta      hash: f = fence counter (see the driver's prelude),
--                   n = the semaphore's limit
-- KEYS[3] holds     hash: hold token -> "fence|kind|owner", where kind is p
--                   (a permit), r (a reader) or w (a writer)
-- KEYS[4] queue     zset of waiting tokens in the order they are served
--                   (each driver scores them); "<queue>:<sub>" is the
--                   channel of the Locker whose subscriber id is sub
-- KEYS[5] waiters   hash: waiting token ->
--                   "deadline|claim|attempt|fenced|sub|kind|owner"
--
-- set and holds expire with their last lease; queue and waiters when no
-- waiter comes back, as a lock's do.
local set, meta, holds, queue, waiters = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]

local function parse_hold(v)
  return string.match(v, '^(%d+)|(%a)|(.*)$')
end

local function parse_waiter(v)
  return string.match(v or '', '^(%d+)|(%d+)|(%d+)|([01])|([^|]*)|(%a)|(.*)$')
end

-- purge drops the holds whose lease has ended, and any hold that is in
-- one of set and holds but not in the other (an operator deleted a key).
local function purge(now)
  local dead = redis.call('ZRANGEBYSCORE', set, '-inf', now)
  if #dead > 0 then
    redis.call('ZREMRANGEBYSCORE', set, '-inf', now)
    for i = 1, #dead do redis.call('HDEL', holds, dead[i]) end
  end
  if redis.call('HLEN', holds) == redis.call('ZCARD', set) then return end
  local hs = redis.call('HKEYS', holds)
  for i = 1, #hs do
    if not redis.call('ZSCORE', set, hs[i]) then redis.call('HDEL', holds, hs[i]) end
  end
  local ms = redis.call('ZRANGE', set, 0, -1)
  for i = 1, #ms do
    if redis.call('HEXISTS', holds, ms[i]) == 0 then redis.call('ZREM', set, ms[i]) end
  end
end

-- keep makes set and holds expire with their last lease.
local function keep()
  local last = redis.call('ZRANGE', set, -1, -1, 'WITHSCORES')[2]
  if not last then
    redis.call('DEL', set, holds)
    return
  end
  last = string.format('%d', tonumber(last))
  redis.call('PEXPIREAT', set, last)
  redis.call('PEXPIREAT', holds, last)
end

-- census counts the holds of owners other than owner ('' counts every
-- hold as another's): all of them, and the writers among them; and says
-- whether owner holds a read lock, and whether it holds anything.
local function census(owner)
  local all = redis.call('HGETALL', holds)
  local others, writers, reads, mine = 0, 0, false, false
  for i = 2, #all, 2 do
    local _, kind, o = parse_hold(all[i])
    if owner ~= '' and o == owner then
      mine = true
      if kind == 'r' then reads = true end
    else
      others = others + 1
      if kind == 'w' then writers = writers + 1 end
    end
  end
  return others, writers, reads, mine
end

-- writer_waits reports whether a live writer other than token queues.
local function writer_waits(now, token)
  local all = redis.call('HGETALL', waiters)
  for i = 1, #all, 2 do
    if all[i] ~= token then
      local deadline, _, _, _, _, kind = parse_waiter(all[i + 1])
      if kind == 'w' and tonumber(deadline) >= now then return true end
    end
  end
  return false
end

-- fits reports whether a hold of kind for owner may be taken now: a permit
-- while fewer than limit are out; a writer while nobody else holds; a
-- reader while no other owner writes and, unless it is handed the lock
-- from the queue (granting) or its owner holds already, no writer waits.
local function fits(kind, owner, limit, granting, now, token)
  if kind == 'p' then return redis.call('ZCARD', set) < limit end
  local others, writers, _, mine = census(owner)
  if kind == 'w' then return others == 0 end
  if writers > 0 then return false end
  if granting or mine then return true end
  return not writer_waits(now, token)
end

-- take records a hold of token, with a lease of ttl ms from now, and
-- makes set and holds live at least as long: whatever the script does
-- next, no key may expire under a hold.
local function take(token, kind, owner, fence, now, ttl)
  redis.call('ZADD', set, now + ttl, token)
  redis.call('HSET', holds, token, string.format('%d', fence) .. '|' .. kind .. '|' .. owner)
  if redis.call('PTTL', set) < ttl then
    redis.call('PEXPIRE', set, ttl)
    redis.call('PEXPIRE', holds, ttl)
  end
end

-- grant hands holds to the live waiters at the head of the queue, in
-- arrival order, as long as they fit, and tells each on its Locker's
-- channel with "<token> <attempt> <fence>", as a lock's grant does. A
-- granted hold lasts the waiter's claim window: the waiter's watchdog
-- extends it to its TTL, and a waiter that died lets it lapse. It stops at
-- the first waiter that does not fit, so a writer at the head holds back
-- the readers behind it.
local function grant(now)
  local limit = tonumber(redis.call('HGET', meta, 'n') or '1')
  for _ = 1, 1000 do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then return end
    local deadline, claim, attempt, fenced, sub, kind, owner = parse_waiter(redis.call('HGET', waiters, head))
    if deadline and tonumber(deadline) >= now then
      if not fits(kind, owner, limit, true, now, head) then return end
      leave_queue(queue, waiters, head)
      local fence = next_fence(meta, fenced)
      take(head, kind, owner, fence, now, tonumber(claim))
      redis.call('SPUBLISH', queue .. ':' .. sub, head .. ' ' .. attempt .. ' ' .. string.format('%d', fence))
    else
      leave_queue(queue, waiters, head) -- a waiter that stopped coming back
    end
  end
end

-- settled is the reply of an attempt that goes no further, else nil:
-- the fence of a hold that is token's already (granted while it waited,
-- or taken by an attempt sent twice), which it renews to now + ttl at
-- least and takes out of the queue; or the error of an owner's attempt
-- at a write hold while it holds a read hold of the key (which would
-- wait for itself).
local function settled(token, kind, owner, now, ttl)
  local mine = redis.call('HGET', holds, token)
  if mine then
    if tonumber(redis.call('ZSCORE', set, token)) < now + ttl then
      redis.call('ZADD', set, now + ttl, token)
    end
    leave_queue(queue, waiters, token)
    keep()
    return tonumber((parse_hold(mine)))
  end
  if kind == 'w' and owner ~= '' then
    local _, _, reads = census(owner)
    if reads then
      return redis.error_reply('DLOCK_UPGRADE the owner holds a read lock of this key')
    end
  end
  return nil
end
