-- release, first part: ARGV[1] token, ARGV[2] owner ('' or absent for a
-- plain lock), ARGV[3] '1' when a waiter gives up (leave the queue first; a
-- grant that arrived is released). A plain lock's release sends the token
-- alone. Returns 1 released, 0 the hold is gone (released before: a re-sent
-- release finds that), -1 another party holds the lock. It writes nothing
-- but the release: the client tells a retried release from a lost lock
-- (see lock.Unlock).
--
-- The plain lock's release comes first, before lock.lua's functions are
-- even defined: with nobody queued it is the compare-and-delete of the
-- single-instance algorithm, whose read of the lock also reads the
-- observed key (KEYS[6]) in one MGET. That key is there while anyone
-- watches the lock, and while anyone queues for it: a waiter that joins
-- the queue keeps it at least as long as the queue (see acquire.lua).
local token, owner, giveup = ARGV[1], ARGV[2] or '', ARGV[3] == '1'
local deleted = false
if owner == '' and not giveup then
  local got = redis.call('MGET', KEYS[1], KEYS[6])
  local current = got[1]
  if current ~= token then
    if current then return -1 end
    return 0
  end
  redis.call('DEL', KEYS[1])
  if not got[2] then return 1 end
  deleted = true
end
