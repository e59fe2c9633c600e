-- raise: the write-back of an acquisition's fence to a node whose counter
-- is behind it. ARGV[1] token, ARGV[2] owner, ARGV[3] the fence.
-- Raises the counter to the fence, never lowers it, provided the hold is
-- still ours (else a later holder may have read the counter already).
-- Returns 1 raised (or already there), 0 not ours.
if not is_ours(ARGV[1], ARGV[2]) then return 0 end
local f = tonumber(ARGV[3])
if (tonumber(redis.call('HGET', meta, 'f')) or 0) < f then
  redis.call('HSET', meta, 'f', ARGV[3])
end
redis.call('PEXPIRE', meta, fence_retention)
return 1
