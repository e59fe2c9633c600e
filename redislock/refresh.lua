-- refresh: set the lease of one lock we hold.
-- KEYS[1] lock, KEYS[2] holds; ARGV[1] token, ARGV[2] owner, ARGV[3] ttl ms.
-- From lease.lua: refresh.
return refresh(KEYS[1], KEYS[2], ARGV[1], ARGV[2], tonumber(ARGV[3]))
