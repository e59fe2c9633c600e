-- lock: the keys of a lock on one server and the rules of its queue, on
-- which both drivers' lock scripts build. Go prepends the driver's fence
-- counter, which defines next_fence(meta, fenced), and base.lua.
--
-- KEYS[1] lock      the lock itself: a string, the token of a plain lock or
--                   "o:<owner>" of an owner's (reentrant) lock
-- KEYS[2] meta      hash: f = the fence counter (see the driver's counter;
--                   it expires when unused)
-- KEYS[3] holds     hash of an owner's lock: hold token -> its fence
-- KEYS[4] queue     zset of waiting tokens in the order they are served
--                   (each driver scores them); "<queue>:<sub>" is the
--                   channel of the Locker whose subscriber id is sub
-- KEYS[5] waiters   hash: waiting token -> "deadline|claim|attempt|fenced|sub|owner";
--                   queue and waiters expire when no waiter comes back
-- KEYS[6] observed  present while some Locker watches the lock (and, in
--                   redislock, while someone queues), which
--                   keeps it alive; its name is also the channel that
--                   tells the watchers of a change
local lock, meta, holds, queue, waiters, observed = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]

-- tell_observers says on the observed channel that the lock changed
-- hands, when someone watches it; unwatched, it costs one EXISTS.
local function tell_observers()
  if redis.call('EXISTS', observed) == 1 then
    redis.call('SPUBLISH', observed, '')
  end
end

-- extend lengthens the lease of the lock (and of an owner's holds) to
-- ttl, never shortens it (a co-owner's).
local function extend(ttl, owner)
  if redis.call('PTTL', lock) < ttl then
    redis.call('PEXPIRE', lock, ttl)
    if owner ~= '' then redis.call('PEXPIRE', holds, ttl) end
  end
end

-- enqueue puts token in the queue at score (nil: it is queued already and
-- keeps its place), with its entry (the deadline counted from now), and
-- keeps the queue for at least twice the claim window (up to three
-- times). A waiter that sends k_max > 1 sleeps longer the further back it
-- queues: its place r (the waiters queued before it) stretches its
-- entry's claim window by (k - 1) * step, where k = min(max(r, 1), k_max),
-- the factor its sleep takes (see package rediswait). It returns the
-- entry's claim window and k.
local function enqueue(token, score, claim, attempt, fenced, sub, owner, k_max, step)
  if score then redis.call('ZADD', queue, score, token) end
  local k = 1
  if k_max and k_max > 1 then
    -- the place, counted up to k_max (by ZRANGEBYSCORE, which the
    -- least-privilege ACL grants, where ZRANK is not)
    local s = score or tonumber(redis.call('ZSCORE', queue, token))
    local r = #redis.call('ZRANGEBYSCORE', queue, '-inf', string.format('(%d', s), 'LIMIT', 0, k_max)
    k = math.max(r, 1)
    claim = claim + (k - 1) * step
  end
  redis.call('HSET', waiters, token, table.concat({now_ms() + claim, claim, attempt, fenced, sub, owner}, '|'))
  if redis.call('PTTL', queue) < 2 * claim then -- also when it has no TTL yet
    -- a claim's worth to spare: a queue of waiters that come back within
    -- their claim windows is extended once per window, not every attempt
    redis.call('PEXPIRE', queue, 3 * claim)
    redis.call('PEXPIRE', waiters, 3 * claim)
  end
  return claim, k
end

-- queued_reply is the busy reply of an attempt that queued with stretch
-- k: busy_reply with k - 1 above the holder's PTTL (see
-- rediswait.StretchShift).
local function queued_reply(k)
  return busy_reply(lock) - (k - 1) * 1099511627776
end

-- live_head returns the first waiter in the queue whose entry is live, its
-- score and its entry's fields, dropping the dead ones on the way.
local function live_head()
  local now
  for _ = 1, 100 do
    local head = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES')
    if not head[1] then return nil end
    local info = redis.call('HGET', waiters, head[1])
    if info then
      now = now or now_ms()
      local deadline, claim, attempt, fenced, sub, owner = string.match(info, '^(%d+)|(%d+)|(%d+)|([01])|([^|]*)|(.*)$')
      if deadline and tonumber(deadline) >= now then
        return head[1], tonumber(head[2]), claim, attempt, fenced, sub, owner
      end
    end
    leave_queue(queue, waiters, head[1])
  end
  return nil
end

-- grant hands the free lock to the first live waiter, for its claim
-- window, and tells it on its Locker's channel with
-- "<token> <attempt> <fence>". The waiter's watchdog extends the grant to
-- its TTL, and a waiter that died lets it lapse. The attempt number is the
-- one of the waiter's last attempt, so that the waiter can tell this grant
-- from an older one that lapsed. A waiter whose Locker no longer listens
-- on that channel (no receiver: its process is gone) is not waited for:
-- the grant is undone, the waiter left out of the queue, and the next one
-- granted. (A waiter that polls, with no subscriber id, is granted
-- without a message; its next attempt confirms it.) Returns true when it
-- granted.
local function grant()
  for _ = 1, 100 do
    local head, _, claim, attempt, fenced, sub, owner = live_head()
    if not head then return false end
    leave_queue(queue, waiters, head)
    local fence = next_fence(meta, fenced)
    if owner == '' then
      redis.call('SET', lock, head, 'PX', claim)
    else
      redis.call('SET', lock, 'o:' .. owner, 'PX', claim)
      redis.call('DEL', holds)
      redis.call('HSET', holds, head, fence)
      redis.call('PEXPIRE', holds, claim)
    end
    if sub == '' then return true end
    if redis.call('SPUBLISH', queue .. ':' .. sub, head .. ' ' .. attempt .. ' ' .. string.format('%d', fence)) > 0 then
      return true
    end
    redis.call('DEL', lock)
    if owner ~= '' then redis.call('DEL', holds) end
  end
  return false
end
