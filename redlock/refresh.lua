-- refresh: set the lease of a lock we hold to ARGV[3] ms (an owner's
-- shared lease: at least that). ARGV[1] token, ARGV[2] owner. Returns 1,
-- or 0 when not ours.
if not is_ours(ARGV[1], ARGV[2]) then return 0 end
local ttl = tonumber(ARGV[3])
if ARGV[2] == '' then
  redis.call('PEXPIRE', lock, ttl)
elseif redis.call('PTTL', lock) < ttl then
  redis.call('PEXPIRE', lock, ttl)
  redis.call('PEXPIRE', holds, ttl)
end
return 1
