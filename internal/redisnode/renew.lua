-- renew: the watchdog's batch on one node, for many locks and holds.
-- Lock i (from 1) has KEYS[2i-1] lock (or set), KEYS[2i] holds, and
-- ARGV[3i-2] token, ARGV[3i-1] owner, ARGV[3i] ttl ms (negative for a
-- hold). Returns 'r' and one character per lock: '1' renewed, '0' not
-- ours (the letter keeps the reply a string, however few the locks). A
-- plain lock's lease becomes ttl, an owner's shared lease at least ttl,
-- and a hold's ttl.
-- From lease.lua: refresh.
local out = {}
for i = 1, #KEYS / 2 do
  out[i] = refresh(KEYS[2 * i - 1], KEYS[2 * i], ARGV[3 * i - 2], ARGV[3 * i - 1], tonumber(ARGV[3 * i]))
end
return 'r' .. table.concat(out)
