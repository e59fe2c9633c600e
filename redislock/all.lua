-- Shared by lock_all.lua and unlock_all.lua, which act on several locks in
-- one call; Go prepends it to them, after prelude.lua and package redisnode's
-- base.lua and lock.lua.
-- Lock i (from 1) has the keys KEYS[6i-5] to KEYS[6i], in lock.lua's
-- order.

-- use makes lock i the one that lock.lua's names and functions (grant,
-- tell_observers) act on.
local function use(i)
  lock, meta, holds, queue, waiters, observed =
    KEYS[6 * i - 5], KEYS[6 * i - 4], KEYS[6 * i - 3], KEYS[6 * i - 2], KEYS[6 * i - 1], KEYS[6 * i]
end
