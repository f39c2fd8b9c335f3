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

-- 3. Claim: hosts whose time has come, earliest first, one URL each. Each
-- host's first queued id is popped, then all their requests are read with one
-- HMGET; a host whose id has no request (corrupt entry) pops its next one.
-- The hosts leave the ready heap and the leases are written in one command each.
local claimed = {}
local missing = 0
local taken = 0
if max_claim > 0 then
  -- (At most CHUNK hosts a call: the HMGET below is one unpack.)
  local hosts = redis.call('ZRANGEBYSCORE', ready, '-inf', now, 'LIMIT', 0, math.min(max_claim, CHUNK - 2))
  if #hosts > 0 then
    -- One lease number per host, reserved at once (a host without a URL leaves a gap).
    local first_lease = redis.call('INCRBY', P .. 'leaseseq', #hosts) - #hosts
    local unready = batch('ZREM', ready)
    local new_leases = batch('ZADD', leases)
    local reqs = P .. 'req'
    -- A host's first queued id and its level (nil when its back queue is empty).
    local function pop(host)
      local popped = redis.call('ZPOPMIN', P .. 'q:' .. host)
      if #popped == 0 then
        return nil
      end
      taken = taken + 1
      return popped[1], math.floor(tonumber(popped[2]) / SCALE)
    end
    local ids, levels_of = {}, {}
    local lookup = {'HMGET', reqs}
    for index, host in ipairs(hosts) do
      push1(unready, host)
      local id, level = pop(host)
      if id then
        ids[index] = id
        levels_of[index] = level
        lookup[#lookup + 1] = id
      end
    end
    local blobs = {}
    if #lookup > 2 then
      blobs = redis.call(unpack(lookup))
    end
    local found = 0
    for index, host in ipairs(hosts) do
      local id, level, blob = ids[index], levels_of[index], nil
      if id then
        found = found + 1
        blob = blobs[found]
        while not blob do
          missing = missing + 1
          id, level = pop(host)
          if not id then
            break
          end
          blob = redis.call('HGET', reqs, id)
        end
      end
      if blob then
        local member = fmt(first_lease + index) .. ' ' .. level .. ' ' .. id .. ' ' .. host
        push2(new_leases, lease_until, member)
        claimed[#claimed + 1] = member
        claimed[#claimed + 1] = blob
      else
        -- The back queue ran dry (only corrupt entries): the host leaves.
        redis.call('SREM', active, host)
      end
    end
    flush(unready)
    flush(new_leases)
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
