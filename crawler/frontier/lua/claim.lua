-- Expire leases, refill back queues from the front queues, and claim URLs of
-- ready hosts under a lease: one URL per host, one lease per URL.
-- KEYS[1]: the shard's lease set (anchors the script to the shard's slot)
-- ARGV: P, now_ms, max_claim, lease_until_ms, max_active, refill_limit,
--       expire_limit, then the front-queue weights, highest priority first.
-- Returns {claimed (flat member, blob pairs), expired, moved, next_ready_ms,
--          next_lease_expiry_ms, queued, leased, missing}.
local P = ARGV[1]
local now = tonumber(ARGV[2])
local max_claim = tonumber(ARGV[3])
local lease_until = ARGV[4]
local max_active = tonumber(ARGV[5])
local refill_limit = tonumber(ARGV[6])
local expire_limit = tonumber(ARGV[7])
local weights = {}
local total_weight = 0
for i = 8, #ARGV do
  weights[#weights + 1] = tonumber(ARGV[i])
  total_weight = total_weight + tonumber(ARGV[i])
end
local levels = #weights

local leases = KEYS[1]
local ready = P .. 'ready'
local active = P .. 'active'
local cool = P .. 'cool'

-- 1. Leases whose worker died (or stalled) give their URL and host back.
local expired = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, expire_limit)
for _, member in ipairs(expired) do
  redis.call('ZREM', leases, member)
  local leaseno, level, id, host = parse_member(member)
  if leaseno then
    requeue(P, host, level, id, now)
  end
end

-- 2. Refill: the biased selector takes from the front queues while there are
-- free back queues. A deterministic weighted round robin over a persistent
-- counter: level l gets weights[l] / sum(weights) of the picks when all are
-- non-empty, so low priority drains too; an empty pick falls through to the
-- highest non-empty level.
redis.call('ZREMRANGEBYSCORE', cool, '-inf', now)
local function pick_front()
  local r = redis.call('INCR', P .. 'sel') % total_weight
  local chosen = levels - 1
  local acc = 0
  for l = 1, levels do
    acc = acc + weights[l]
    if r < acc then
      chosen = l - 1
      break
    end
  end
  local entry = redis.call('RPOP', P .. 'front:' .. chosen)
  if entry then
    return entry, chosen
  end
  for l = 0, levels - 1 do
    if l ~= chosen then
      entry = redis.call('RPOP', P .. 'front:' .. l)
      if entry then
        return entry, l
      end
    end
  end
  return nil, nil
end

local nactive = redis.call('SCARD', active)
local moved = 0
while nactive < max_active and moved < refill_limit do
  local entry, level = pick_front()
  if not entry then
    break
  end
  -- "<host> <id> <request>" (from enqueue) or "<host> <id>" (the request is
  -- already in the request hash: drained revisits, revived dead letters).
  local space = string.find(entry, ' ', 1, true)
  local host = string.sub(entry, 1, space - 1)
  local second = string.find(entry, ' ', space + 1, true)
  local id
  if second then
    id = string.sub(entry, space + 1, second - 1)
    redis.call('HSET', P .. 'req', id, string.sub(entry, second + 1))
  else
    id = string.sub(entry, space + 1)
  end
  redis.call('ZADD', P .. 'q:' .. host, fmt(level * SCALE + tonumber(id)), id)
  if redis.call('SADD', active, host) == 1 then
    nactive = nactive + 1
    local at = now
    local resting = redis.call('ZSCORE', cool, host)
    if resting then
      at = math.max(now, tonumber(resting))
      redis.call('ZREM', cool, host)
    end
    redis.call('ZADD', ready, at, host)
  end
  moved = moved + 1
end

-- 3. Claim: hosts whose time has come, earliest first, one URL each.
local claimed = {}
local missing = 0
local taken = 0
if max_claim > 0 then
  local hosts = redis.call('ZRANGEBYSCORE', ready, '-inf', now, 'LIMIT', 0, max_claim)
  -- One lease number per host, reserved at once (a host without a URL leaves a gap).
  local first_lease = 0
  if #hosts > 0 then
    first_lease = redis.call('INCRBY', P .. 'leaseseq', #hosts) - #hosts
  end
  for index, host in ipairs(hosts) do
    redis.call('ZREM', ready, host)
    local queue = P .. 'q:' .. host
    local blob = nil
    local member = nil
    while not blob do
      local popped = redis.call('ZPOPMIN', queue)
      if #popped == 0 then
        break
      end
      taken = taken + 1
      local id = popped[1]
      local level = math.floor(tonumber(popped[2]) / SCALE)
      blob = redis.call('HGET', P .. 'req', id)
      if blob then
        member = fmt(first_lease + index) .. ' ' .. level .. ' ' .. id .. ' ' .. host
        redis.call('ZADD', leases, lease_until, member)
      else
        missing = missing + 1
      end
    end
    if blob then
      claimed[#claimed + 1] = member
      claimed[#claimed + 1] = blob
    else
      -- The back queue ran dry (only corrupt entries): the host leaves.
      redis.call('SREM', active, host)
    end
  end
end
if taken > 0 then
  redis.call('DECRBY', P .. 'queued', taken)
end

local next_ready = redis.call('ZRANGE', ready, 0, 0, 'WITHSCORES')
local next_expiry = redis.call('ZRANGE', leases, 0, 0, 'WITHSCORES')
return {
  claimed,
  #expired,
  moved,
  next_ready[2] and tonumber(next_ready[2]) or -1,
  next_expiry[2] and tonumber(next_expiry[2]) or -1,
  tonumber(redis.call('GET', P .. 'queued') or '0'),
  redis.call('ZCARD', leases),
  missing,
}
