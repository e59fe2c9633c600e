-- lapse: UnlockAfter's token-checked PEXPIRE. KEYS[1] lock (or a hold's
-- set), KEYS[2] holds; ARGV[1] token, ARGV[2] owner, ARGV[3] the lapse in
-- ms (negative for a hold, whose lease is its own). Returns 1, or 0 when
-- not ours.
-- From lease.lua: lapse.
return lapse(KEYS[1], KEYS[2], ARGV[1], ARGV[2], tonumber(ARGV[3]))
