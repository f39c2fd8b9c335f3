#!lua
-- Give back leases that were claimed but never fetched (a worker closing):
-- the entry returns to the head of its host's queue and the host is ready now.
-- KEYS[1]: the shard's lease set
-- ARGV[1]: P; ARGV[2]: now_ms; ARGV[3]: grouped (1: politeness groups, see frontier/lua/hosts.lua);
-- ARGV[4]: requests in flight per host at most (FRONTIER_CONCURRENCY_PER_KEY);
-- ARGV[5]: 1 if some keys have a k of their own (DOWNLOAD_SLOTS); then one lease member per value.
-- Returns the number of leases released.
local P = ARGV[1]
local now = ARGV[2]
local grouped = ARGV[3] == '1'
local k_of = slot_limits(P, tonumber(ARGV[4]), ARGV[5] == '1')
local leases = KEYS[1]
local released = 0
for i = 6, #ARGV do
  if redis.call('ZREM', leases, ARGV[i]) == 1 then
    local leaseno, level, id, host = parse_member(ARGV[i])
    if leaseno then
      requeue(P, leaseno, id, host, level, now, grouped, k_of)
      released = released + 1
    end
  end
end
return released
