-- downgrade: turn a write lock into a read lock, with the same token,
-- fence and lease; readers at the head of the queue may then enter.
-- ARGV[1] token. Returns 1 done, 0 the hold is gone, -1 it is a read lock
-- already (an earlier downgrade whose reply was lost).
-- From the driver's fence counter: next_fence; from base.lua:
-- leave_queue; from shared.lua: the rest.
local token = ARGV[1]
local now = now_ms()
local score = redis.call('ZSCORE', set, token)
local v = redis.call('HGET', holds, token)
if not score or not v or tonumber(score) <= now then return 0 end
local fence, kind, owner = parse_hold(v)
if kind ~= 'w' then return -1 end
redis.call('HSET', holds, token, fence .. '|r|' .. owner)
grant(now)
return 1
