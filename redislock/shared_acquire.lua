-- shared_acquire: one attempt to take a permit, a read lock or a write
-- lock, or to confirm a grant.
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] owner ('' for none), ARGV[4]
-- mode (as acquire.lua's: 0 try, 1 fair try, 2 wait, 3 fair wait),
-- ARGV[5] claim window in ms of a waiter's queue entry, ARGV[6] the number
-- of this attempt of the waiter, ARGV[7] '1' for a fenced acquisition,
-- ARGV[8] the subscriber id of the waiter's Locker, ARGV[9] the kind (p, r
-- or w), ARGV[10] the semaphore's limit (permits only).
-- Returns the fence (0 when not fenced) when the hold is ours, else -1 -
-- the time in ms until the first hold ends (-1: unknown). An owner that
-- holds a read lock and asks for the write lock gets the error
-- DLOCK_UPGRADE, and nothing changes.
-- From prelude.lua: next_fence; from base.lua: leave_queue; from
-- shared.lua: the rest.
local token, ttl, owner, mode, claim = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local fenced, kind, limit = ARGV[7], ARGV[9], tonumber(ARGV[10])
local fair, wait = mode % 2 == 1, mode >= 2
local now = now_ms()

purge(now)
if kind == 'p' and redis.call('HGET', meta, 'n') ~= ARGV[10] then
  -- the latest acquisition's limit is the semaphore's
  redis.call('HSET', meta, 'n', ARGV[10])
  redis.call('PEXPIRE', meta, fence_retention)
end
grant(now) -- room made by an expiry or a raised limit goes to the queue first

local done = settled(token, kind, owner, now, ttl)
if done then return done end

local ok = fits(kind, owner, limit, false, now, token)
if ok and fair then
  -- not while a live waiter queues ahead
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  ok = not head or head == token
end
if ok then
  local fence = next_fence(meta, fenced)
  take(token, kind, owner, fence, now, ttl)
  if wait then leave_queue(queue, waiters, token) end
  keep()
  return fence
end

if wait then
  if not redis.call('ZSCORE', queue, token) then
    local last = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')[2]
    redis.call('ZADD', queue, (tonumber(last) or 0) + 1, token)
  end
  redis.call('HSET', waiters, token, table.concat({now + claim, claim, ARGV[6], fenced, ARGV[8], kind, owner}, '|'))
  if redis.call('PTTL', queue) < 2 * claim then
    redis.call('PEXPIRE', queue, 2 * claim)
    redis.call('PEXPIRE', waiters, 2 * claim)
  end
end
local first = redis.call('ZRANGE', set, 0, 0, 'WITHSCORES')[2]
if not first then return -1 end
return -1 - math.max(tonumber(first) - now, 1)
