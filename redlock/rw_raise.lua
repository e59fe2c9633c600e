-- rw_raise: raise.lua for a read or write hold. ARGV[1] token, ARGV[3]
-- the fence. Raises the counter to the fence, never lowers it, provided
-- the hold is still ours (its lease has not ended). Returns 1 raised (or
-- already there), 0 not ours.
-- From counter.lua: raise_to; from base.lua: now_ms; from shared.lua:
-- the keys.
local score = redis.call('ZSCORE', set, ARGV[1])
if not score or tonumber(score) <= now_ms() then return 0 end
raise_to(meta, ARGV[3])
return 1
