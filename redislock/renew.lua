-- renew: the watchdog's batch, one call for many locks of one server.
-- Lock i (from 1) is KEYS[2i-1] lock, KEYS[2i] holds, ARGV[3i-2] token,
-- ARGV[3i-1] owner, ARGV[3i] ttl in ms. Returns a string with one
-- character per lock: '1' renewed, '0' no longer ours.
-- From lease.lua: refresh.
local out = {}
for i = 1, #KEYS / 2 do
  out[i] = refresh(KEYS[2 * i - 1], KEYS[2 * i], ARGV[3 * i - 2], ARGV[3 * i - 1], tonumber(ARGV[3 * i]))
end
return table.concat(out)
