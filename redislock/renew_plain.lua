-- renew_plain: the watchdog's batch of plain locks (no owner) on one
-- server, all renewed for the same lease: what renew.lua does for them,
-- with two arguments per lock instead of five. KEYS[i] is lock i, ARGV[1]
-- the ttl in ms, ARGV[i+1] the token of lock i. Returns 'r' and one
-- character per lock: '1' renewed (its lease is now ttl), '0' not ours.
local ttl = ARGV[1]
local out = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[i + 1] then
    redis.call('PEXPIRE', KEYS[i], ttl)
    out[i] = '1'
  else
    out[i] = '0'
  end
end
return 'r' .. table.concat(out)
