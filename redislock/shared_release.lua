-- shared_release: give back a permit, a read lock or a write lock, and
-- hand the room to the waiters that now fit.
-- ARGV[1] token, ARGV[2] '1' when a waiter gives up (leave the queue
-- first; a grant that arrived is released).
-- Returns 1 released, 0 the hold is gone (released before: a re-sent
-- release finds that; or its lease ended).
-- From base.lua: leave_queue; from shared.lua: the rest.
local token = ARGV[1]
local now = now_ms()
if ARGV[2] == '1' then leave_queue(queue, waiters, token) end
local score = redis.call('ZSCORE', set, token)
local released = 0
if score and tonumber(score) > now then released = 1 end
redis.call('ZREM', set, token)
redis.call('HDEL', holds, token)
purge(now)
grant(now)
keep()
return released
