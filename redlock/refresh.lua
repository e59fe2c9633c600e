-- refresh: set the lease of a lock or a hold we hold (KEYS[1] the lock,
-- or a read-write lock's set; KEYS[3] its holds) to ARGV[3] ms: a plain
-- lock's lease becomes that, an owner's shared lease at least that, and a
-- hold's (a negative ARGV[3]) that. ARGV[1] token, ARGV[2] owner.
-- Returns 1, or 0 when not ours.
-- From redisnode's lease.lua: refresh.
return refresh(KEYS[1], KEYS[3], ARGV[1], ARGV[2], tonumber(ARGV[3]))
