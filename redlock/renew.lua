-- renew: the watchdog's batch on one node, for many locks. Lock i (from
-- 0) has KEYS[2i+1] lock, KEYS[2i+2] holds, and ARGV[3i+1] token, ARGV[3i+2] owner,
-- ARGV[3i+3] ttl ms. Returns one character per lock: '1' renewed, '0' not
-- ours. A plain lock's lease becomes ttl; an owner's shared lease is
-- extended to at least ttl.
local out = {}
for i = 0, #KEYS / 2 - 1 do
  lock, holds = KEYS[2 * i + 1], KEYS[2 * i + 2]
  local token, owner, ttl = ARGV[3 * i + 1], ARGV[3 * i + 2], tonumber(ARGV[3 * i + 3])
  if not is_ours(token, owner) then
    out[i + 1] = '0'
  else
    if owner == '' then
      redis.call('PEXPIRE', lock, ttl)
    elseif redis.call('PTTL', lock) < ttl then
      redis.call('PEXPIRE', lock, ttl)
      redis.call('PEXPIRE', holds, ttl)
    end
    out[i + 1] = '1'
  end
end
return table.concat(out)
