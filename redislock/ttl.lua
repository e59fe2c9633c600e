-- ttl: the remaining lease of a lock we hold, in ms; -3 when not ours.
-- KEYS[1] lock, KEYS[2] holds; ARGV[1] token, ARGV[2] owner.
local token, owner = ARGV[1], ARGV[2]
local current = redis.call('GET', KEYS[1])
if (owner == '' and current == token) or
   (owner ~= '' and current == 'o:' .. owner and redis.call('HEXISTS', KEYS[2], token) == 1) then
  return redis.call('PTTL', KEYS[1])
end
return -3
