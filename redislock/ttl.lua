-- ttl: the remaining lease of a lock we hold, in ms; -3 when not ours.
-- KEYS[1] lock, KEYS[2] holds; ARGV[1] token, ARGV[2] owner.
-- From lease.lua: is_ours.
if is_ours(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then
  return redis.call('PTTL', KEYS[1])
end
return -3
