-- shared_ttl: the remaining lease of a hold of a semaphore or read-write
-- lock, in ms; -3 when it is gone.
-- KEYS[1] set; ARGV[1] token.
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return -3 end
local t = redis.call('TIME')
local left = tonumber(score) - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
if left <= 0 then return -3 end
return left
