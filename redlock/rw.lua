-- rw: what redisnode's shared.lua needs of a driver, for Redlock's
-- read-write locks; Go prepends counter.lua and base.lua to it, and appends shared.lua
-- and the script's own part (rw_acquire.lua, rw_release.lua,
-- rw_raise.lua, redisnode's downgrade.lua).
--
-- Each node keeps a read-write lock as one Redis server does (see
-- shared.lua), but for the queue: its waiters are scored by the time each
-- began to wait, the same score on every node, so that every node serves
-- them in the same order, as a lock's queue does (see common.lua).

-- enqueue puts token in the queue at score, with its entry in shared.lua's
-- format (deadline counted from now, in ms), and keeps the queue for
-- twice the claim window.
local function enqueue(queue, waiters, token, score, claim, attempt, sub, kind, owner, now)
  redis.call('ZADD', queue, score, token)
  redis.call('HSET', waiters, token, table.concat({now + claim, claim, attempt, '1', sub, kind, owner}, '|'))
  if redis.call('PTTL', queue) < 2 * claim then
    redis.call('PEXPIRE', queue, 2 * claim)
    redis.call('PEXPIRE', waiters, 2 * claim)
  end
end
