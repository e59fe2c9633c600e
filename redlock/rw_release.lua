-- rw_release: one node's part of the release of a read or write hold.
-- ARGV as release.lua's: [1] token, [2] owner, [3] mode: '0' release, '1'
-- a waiter gives up (leave the queue, and release a grant it had), '2' a
-- waiter gives back what a failed attempt took but stays queued ([4]
-- score, [5] claim ms, [6] attempt, [7] subscriber id); [8] the caller's
-- clock in µs, for the fences of grants; and [9] the kind.
-- Returns 1 released, 0 the hold is gone (released before, or its lease
-- ended). The room goes to the waiters at the head of the queue that now
-- fit.
-- From base.lua: leave_queue; from rw.lua: enqueue; from shared.lua:
-- the rest.
local token, owner, mode = ARGV[1], ARGV[2], ARGV[3]
floor_us = tonumber(ARGV[8])
local now = now_ms()
leave_queue(queue, waiters, token)
local score = redis.call('ZSCORE', set, token)
local out = 0
if score and tonumber(score) > now then out = 1 end
redis.call('ZREM', set, token)
redis.call('HDEL', holds, token)
purge(now)
if mode == '2' then
  enqueue(queue, waiters, token, tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], ARGV[7], ARGV[9], owner, now)
end
grant(now)
keep()
return out
