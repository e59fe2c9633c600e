-- force: delete a lock whoever holds it (an operator's `dlock unlock
-- --force`), and hand it to the first live waiter. Returns false when the
-- lock is free, else {value, pttl, holds, fence} of what was deleted.
-- It follows lock.lua.
local value = redis.call('GET', lock)
if not value then return false end
local pttl = redis.call('PTTL', lock)
local n = redis.call('HLEN', holds)
local fence = tonumber(redis.call('HGET', meta, 'f') or '0')
redis.call('DEL', lock, holds)
grant()
tell_observers()
return {value, pttl, n, fence}
