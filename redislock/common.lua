-- Shared by acquire.lua, release.lua and force.lua; Go prepends it (to
-- release.lua, after release_head.lua), after prelude.lua.
--
-- KEYS[1] lock      the lock itself: a string, the token of a plain lock or
--                   "o:<owner>" of an owner's (reentrant) lock
-- KEYS[2] meta      hash written by fenced acquisitions only: f = fencing
--                   counter (see prelude.lua; it expires when unused)
-- KEYS[3] holds     hash of an owner's lock: hold token -> its fence
-- KEYS[4] queue     zset of waiting tokens by arrival; "<queue>:<sub>" is
--                   the channel of the Locker whose subscriber id is sub
-- KEYS[5] waiters   hash: waiting token -> "deadline|claim|attempt|fenced|sub|owner";
--                   queue and waiters expire when no waiter comes back
-- KEYS[6] observed  present while some Locker watches the lock (see
--                   watch.go), which keeps it alive; its name is also the
--                   channel that tells the watchers of a change
local lock, meta, holds, queue, waiters, observed = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]

-- tell_observers says on the observed channel that the lock changed
-- hands, when someone watches it; unwatched, it costs one EXISTS.
local function tell_observers()
  if redis.call('EXISTS', observed) == 1 then
    redis.call('SPUBLISH', observed, '')
  end
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end


-- grant hands a free lock to the first live waiter in the queue, dropping
-- waiters whose deadline passed, and tells it on its Locker's channel with
-- "<token> <attempt> <fence>". The grant lasts the waiter's claim window:
-- the waiter's watchdog extends it to its TTL, and a waiter that
-- died lets it lapse. The attempt number is the one of the waiter's last
-- attempt, so that the waiter can tell this grant from an older one that
-- lapsed. Returns true when it granted.
local function grant()
  local now
  for _ = 1, 100 do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then return false end
    local info = redis.call('HGET', waiters, head)
    leave_queue(queue, waiters, head)
    if info then
      now = now or now_ms()
      local deadline, claim, attempt, fenced, sub, owner = string.match(info, '^(%d+)|(%d+)|(%d+)|([01])|([^|]*)|(.*)$')
      if deadline and tonumber(deadline) >= now then
        local fence = next_fence(meta, fenced)
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
    end
  end
  return false
end
