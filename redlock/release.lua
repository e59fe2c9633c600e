-- release: one node's part of a release.
-- ARGV[1] token, ARGV[2] owner, ARGV[3] mode: '0' release, '1' a waiter
-- gives up (leave the queue, and release a grant it had), '2' a waiter
-- gives back what a failed attempt took but stays queued (ARGV[4] score,
-- ARGV[5] claim ms, ARGV[6] attempt, ARGV[7] subscriber id); ARGV[8] the
-- caller's clock in µs, for the fence of a grant; ARGV[9] and ARGV[10]
-- the stretch of a requeued entry (see acquire.lua).
-- Returns 1 released, 0 the hold is gone (released before, or expired),
-- -1 another party holds the lock. A freed lock goes to the first live
-- waiter; a lock that changed hands tells its watchers.
local token, owner, mode = ARGV[1], ARGV[2], ARGV[3]
floor_us = tonumber(ARGV[8])
-- the plain path: compare-and-delete, the lock going to the first live
-- waiter instead when there is one (the holder has no entry here: each
-- way of taking a node's lock takes the taker's entry out of its queue).
-- One MGET reads the lock and whether anyone watches it; grant's first
-- look at the queue is all that an empty one costs.
if owner == '' and mode == '0' then
  local seen = redis.call('MGET', lock, observed)
  if seen[1] == token then
    if not grant() then redis.call('DEL', lock) end
    if seen[2] then redis.call('SPUBLISH', observed, '') end
    return 1
  end
end
leave_queue(queue, waiters, token) -- a waiter's entry, or one left by the waiter this hold was
local value = token
if owner ~= '' then value = 'o:' .. owner end
local current = redis.call('GET', lock)
local out, deleted = 1, false
if current ~= value then
  if current then out = -1 else out = 0 end
elseif owner ~= '' and redis.call('HDEL', holds, token) == 0 then
  out = 0
elseif owner == '' or redis.call('EXISTS', holds) == 0 then
  redis.call('DEL', lock)
  deleted = true
else
  return 1 -- the owner holds the lock still
end
if mode == '2' then
  enqueue(token, tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], '1', ARGV[7], owner, tonumber(ARGV[9]), tonumber(ARGV[10]))
end
if redis.call('EXISTS', lock) == 0 then
  if grant() or deleted then tell_observers() end
end
return out
