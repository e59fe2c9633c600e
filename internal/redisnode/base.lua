-- base: the helpers of every script that takes or gives back a lock or a
-- hold, in both Redis drivers. Go prepends it to lock.lua and shared.lua,
-- after the driver's fence counter.

-- now_ms is the server's clock in milliseconds.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- busy_reply is the reply of an attempt that found lock held by another:
-- -1 - its PTTL, where a PTTL of 0 means unknown (a key without TTL) and a
-- lease in its last millisecond counts as 1, so that a waiter looks again
-- at once rather than after its interval.
local function busy_reply(lock)
  local pttl = redis.call('PTTL', lock)
  if pttl < 0 then pttl = 0 elseif pttl == 0 then pttl = 1 end
  return -1 - pttl
end

-- leave_queue takes token out of the wait queue and its entry.
local function leave_queue(queue, waiters, token)
  redis.call('ZREM', queue, token)
  redis.call('HDEL', waiters, token)
end
