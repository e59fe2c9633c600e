-- ttl: the remaining lease of a lock we hold, in ms; -3 when not ours.
-- ARGV[1] token, ARGV[2] owner.
if is_ours(ARGV[1], ARGV[2]) then return redis.call('PTTL', lock) end
return -3
