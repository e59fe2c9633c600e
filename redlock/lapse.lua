-- lapse: UnlockAfter's token-checked PEXPIRE on one node. KEYS[1] the
-- lock, or a read-write lock's set; KEYS[3] its holds. ARGV[1] token,
-- ARGV[2] owner, ARGV[3] the lapse in ms (negative for a read or write
-- hold, whose lease is its own). Returns 1, or 0 when not ours.
-- From redisnode's lease.lua: lapse.
return lapse(KEYS[1], KEYS[3], ARGV[1], ARGV[2], tonumber(ARGV[3]))
