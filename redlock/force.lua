-- force: what redlock adds to package redisnode's force.lua, which
-- follows it. ARGV[1] the caller's clock in µs, for the fence of a grant.
floor_us = tonumber(ARGV[1])
