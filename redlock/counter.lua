-- counter: a key's fence counter on one node, for every redlock script
-- that moves it, a lock's and a read-write lock's; Go prepends it to each
-- of them.

-- fence_retention: a counter expires this long (ms) after its last use,
-- so that a node keeps no counter for a key nobody uses.
local fence_retention = 86400000

-- floor_us is the caller's clock in microseconds, when the script's
-- caller sent it (each script sets it from its arguments).
local floor_us = nil

-- next_fence moves the counter (field f of the hash m) up and returns
-- it: one step, or to the caller's clock in microseconds (the node's,
-- when the caller sent none) when that is higher. The caller sends the
-- same clock to every node, so the counters of the nodes it reaches meet
-- at that value even when one of them missed an acquisition, and no
-- round trip is needed to bring it up (see fence). A counter that does
-- not exist (never used, expired, or lost in a restart without
-- persistence) starts there too, above every fence handed out before
-- (see RestartDelay for the conditions). Redlock fences every
-- acquisition: a second argument (shared.lua's "fenced") is ignored.
local function next_fence(m)
  local f = (tonumber(redis.call('HGET', m, 'f')) or 0) + 1
  local floor = floor_us
  if not floor then
    local t = redis.call('TIME')
    floor = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  if floor > f then f = floor end
  redis.call('HSET', m, 'f', string.format('%d', f))
  redis.call('PEXPIRE', m, fence_retention)
  return f
end

-- raise_to raises the counter of the hash m to the fence f (a decimal
-- string), never lowers it, and keeps it for fence_retention.
local function raise_to(m, f)
  if (tonumber(redis.call('HGET', m, 'f')) or 0) < tonumber(f) then
    redis.call('HSET', m, 'f', f)
  end
  redis.call('PEXPIRE', m, fence_retention)
end
