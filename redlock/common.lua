-- common: what redlock's lock scripts add to package redisnode's
-- lock.lua, which Go prepends to it (after counter.lua and base.lua).
--
-- A node's queue scores its waiters by the time each began to wait, the
-- same score on every node, so that every node serves them in the same
-- order.

-- is_ours reports whether the hold of token (for owner, '' for a plain
-- lock) is the lock's.
local function is_ours(token, owner)
  if owner == '' then return redis.call('GET', lock) == token end
  return redis.call('GET', lock) == 'o:' .. owner and redis.call('HEXISTS', holds, token) == 1
end
