-- force: delete the lock whoever holds it and hand it to the first live
-- waiter. ARGV[1] the caller's clock in µs, for the fence of a grant.
-- Returns false when free, else {value, pttl, holds, fence}.
floor_us = tonumber(ARGV[1])
local value = redis.call('GET', lock)
if not value then return false end
local pttl = redis.call('PTTL', lock)
local n = redis.call('HLEN', holds)
local fence = tonumber(redis.call('HGET', meta, 'f') or '0')
redis.call('DEL', lock, holds)
grant()
tell_observers()
return {value, pttl, n, fence}
