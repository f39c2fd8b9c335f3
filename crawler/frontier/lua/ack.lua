-- Complete leases: forget the request, and give the host its next allowed
-- time. Idempotent: a lease that is no longer held (acked before, or expired
-- and handed to another worker) changes nothing.
-- KEYS[1]: the shard's lease set
-- ARGV[1]: P; then 3 values per lease: member, next_allowed_ms, completed_ms.
-- next_allowed_ms is the politeness policy's answer; a per-host floor that
-- other components keep in P..'hostdelay' (ms) raises it.
-- Returns {acked, stale}.
local P = ARGV[1]
local leases = KEYS[1]
local acked, stale = 0, 0
for i = 2, #ARGV, 3 do
  local member = ARGV[i]
  if redis.call('ZREM', leases, member) == 1 then
    local leaseno, level, id, host = parse_member(member)
    if leaseno then
      redis.call('HDEL', P .. 'req', id)
      local at = tonumber(ARGV[i + 1])
      local floor = redis.call('HGET', P .. 'hostdelay', host)
      if floor then
        at = math.max(at, tonumber(ARGV[i + 2]) + tonumber(floor))
      end
      if redis.call('ZCARD', P .. 'q:' .. host) > 0 then
        redis.call('ZADD', P .. 'ready', at, host)
      else
        redis.call('SREM', P .. 'active', host)
        redis.call('ZADD', P .. 'cool', at, host)
      end
    end
    acked = acked + 1
  else
    stale = stale + 1
  end
end
return {acked, stale}
