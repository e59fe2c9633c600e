-- common: the keys and helpers of every redlock script of a lock on one
-- node; Go prepends it to each of them, after counter.lua.
--
-- KEYS[1] lock     the lock: a string, the token of a plain lock or
--                  "o:<owner>" of an owner's (reentrant) lock
-- KEYS[2] meta     hash: f = this node's fence counter of the key
-- KEYS[3] holds    hash of an owner's lock: hold token -> its fence
-- KEYS[4] queue    zset of waiting tokens, scored by the time each waiter
--                  began to wait (the same score on every node, so that
--                  every node serves the waiters in the same order)
-- KEYS[5] waiters  hash: token -> "deadline|claim|attempt|sub|owner"
-- KEYS[6] observed present while some Locker watches the lock (see
--                  watch.go), which keeps it alive; its name is also the
--                  channel that tells the watchers of a change
local lock, meta, holds, queue, waiters, observed = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]

-- tell_observers says on the observed channel that the lock changed
-- hands on this node, when someone watches it; unwatched, it costs one
-- EXISTS.
local function tell_observers()
  if redis.call('EXISTS', observed) == 1 then
    redis.call('SPUBLISH', observed, '')
  end
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- busy_reply: -1 - the holder's PTTL (0: unknown; a lease in its last
-- millisecond counts as 1).
local function busy_reply()
  local pttl = redis.call('PTTL', lock)
  if pttl < 0 then pttl = 0 elseif pttl == 0 then pttl = 1 end
  return -1 - pttl
end

local function leave_queue(token)
  redis.call('ZREM', queue, token)
  redis.call('HDEL', waiters, token)
end

-- enqueue puts token in the queue at score, with its entry (deadline
-- counted from now), and keeps the queue for twice the claim window.
local function enqueue(token, score, claim, attempt, sub, owner)
  redis.call('ZADD', queue, score, token)
  redis.call('HSET', waiters, token, table.concat({now_ms() + claim, claim, attempt, sub, owner}, '|'))
  if redis.call('PTTL', queue) < 2 * claim then
    redis.call('PEXPIRE', queue, 2 * claim)
    redis.call('PEXPIRE', waiters, 2 * claim)
  end
end

-- live_head returns the first waiter in the queue whose entry is live,
-- and its entry's fields, dropping the dead ones on the way.
local function live_head()
  local now
  for _ = 1, 100 do
    local head = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES')
    if not head[1] then return nil end
    local info = redis.call('HGET', waiters, head[1])
    if info then
      now = now or now_ms()
      local deadline, claim, attempt, sub, owner = string.match(info, '^(%d+)|(%d+)|(%d+)|([^|]*)|(.*)$')
      if deadline and tonumber(deadline) >= now then
        return head[1], tonumber(head[2]), claim, attempt, sub, owner
      end
    end
    leave_queue(head[1])
  end
  return nil
end

-- grant hands the free lock to the first live waiter, for its claim
-- window, and tells it on its Locker's channel with
-- "<token> <attempt> <fence>". The waiter's watchdog extends the grant.
local function grant()
  local head, _, claim, attempt, sub, owner = live_head()
  if not head then return false end
  leave_queue(head)
  local fence = next_fence(meta)
  if owner == '' then
    redis.call('SET', lock, head, 'PX', claim)
  else
    redis.call('SET', lock, 'o:' .. owner, 'PX', claim)
    redis.call('DEL', holds)
    redis.call('HSET', holds, head, fence)
    redis.call('PEXPIRE', holds, claim)
  end
  redis.call('SPUBLISH', queue .. ':' .. sub, head .. ' ' .. attempt .. ' ' .. string.format('%d', fence))
  return true
end

-- is_ours reports whether the hold of token (for owner, '' for a plain
-- lock) is the lock's.
local function is_ours(token, owner)
  if owner == '' then return redis.call('GET', lock) == token end
  return redis.call('GET', lock) == 'o:' .. owner and redis.call('HEXISTS', holds, token) == 1
end
