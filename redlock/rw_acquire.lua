-- rw_acquire: one node's part of an attempt at a read or write hold, or
-- the confirmation of a grant. ARGV as acquire.lua's: [1] token, [2] ttl
-- ms, [3] owner ('' for none), [4] '1' when the caller waits (join the
-- queue when the hold does not fit), [5] the waiter's score, [6] its
-- claim window ms, [7] its attempt number, [8] its Locker's subscriber
-- id, [9] the caller's clock in µs (see counter.lua); and [10] the kind,
-- 'r' or 'w'.
-- Returns this node's fence (>= 0) when the hold is ours, else -1 - the
-- time in ms until the first hold ends (-1: unknown). An owner that holds
-- a read lock and asks for the write lock gets the error DLOCK_UPGRADE,
-- and nothing changes.
-- From base.lua: leave_queue; from rw.lua: enqueue; from shared.lua:
-- the rest.
local token, ttl, owner, wait = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4] == '1'
local kind = ARGV[10]
floor_us = tonumber(ARGV[9])
local now = now_ms()

purge(now)
grant(now) -- room made by an expiry goes to the queue first

local done = settled(token, kind, owner, now, ttl)
if done then return done end

-- After grant, a live waiter left in the queue does not fit, so neither
-- does a newcomer, but for an owner's reentry: no waiter is passed.
if fits(kind, owner, 1, false, now, token) then
  local fence = next_fence(meta)
  take(token, kind, owner, fence, now, ttl)
  leave_queue(queue, waiters, token)
  keep()
  return fence
end

if wait then
  enqueue(queue, waiters, token, tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], ARGV[8], kind, owner, now)
end
local first = redis.call('ZRANGE', set, 0, 0, 'WITHSCORES')[2]
if not first then return -1 end
return -1 - math.max(tonumber(first) - now, 1)
