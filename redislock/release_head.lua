-- release, first part: ARGV[1] token, ARGV[2] owner ('' or absent for a
-- plain lock), ARGV[3] '1' when a waiter gives up (leave the queue first; a
-- grant that arrived is released). A plain lock's release sends the token
-- alone. Returns 1 released, 0 not held. It writes nothing
-- but the release: a retried release is recognised by the client (see
-- lock.Unlock).
--
-- The plain lock's release comes first, before common.lua's functions are
-- even defined: with nobody queued it is the compare-and-delete of the
-- single-instance algorithm and one EXISTS.
local token, owner, giveup = ARGV[1], ARGV[2] or '', ARGV[3] == '1'
local deleted = false
if owner == '' and not giveup then
  if redis.call('GET', KEYS[1]) ~= token then return 0 end
  redis.call('DEL', KEYS[1])
  if redis.call('EXISTS', KEYS[4]) == 0 then return 1 end
  deleted = true
end
