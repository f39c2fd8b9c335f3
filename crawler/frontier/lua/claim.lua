-- Expire leases, wake sleeping hosts, open hosts as the claim needs them, and
-- claim URLs of ready hosts under a lease: one URL per host, one lease per URL.
-- KEYS[1]: the shard's lease set (anchors the script to the shard's slot)
-- ARGV: P, now_ms, max_claim, lease_until_ms, max_awake, refill_limit,
--       expire_limit, sleep_horizon_ms, robots_first (1: a host's robots.txt
--       decision must exist before its pages are handed out), grouped (1:
--       politeness groups, see common.lua), then the front-queue weights,
--       highest priority first.
-- Returns {claimed (flat member, blob pairs), expired, moved, next_ready_ms,
--          next_lease_expiry_ms, queued, leased, missing, opened, woken}.
local P = ARGV[1]
local now = tonumber(ARGV[2])
local max_claim = tonumber(ARGV[3])
local lease_until = ARGV[4]
local max_awake = tonumber(ARGV[5])
local refill_limit = tonumber(ARGV[6])
local expire_limit = tonumber(ARGV[7])
local horizon = tonumber(ARGV[8])
local robots_first = ARGV[9] == '1'
local grouped = ARGV[10] == '1'
local weights = {}
local total_weight = 0
for i = 11, #ARGV do
  weights[#weights + 1] = tonumber(ARGV[i])
  total_weight = total_weight + tonumber(ARGV[i])
end
local levels = #weights

local leases = KEYS[1]
local ready = P .. K.ready
local active = P .. K.active
local cool = P .. K.cool
local sleeping = P .. K.sleeping

-- 1. Leases whose worker died (or stalled) give their URL and host back.
local expired = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, expire_limit)
for _, member in ipairs(expired) do
  redis.call('ZREM', leases, member)
  local leaseno, level, id, host = parse_member(member)
  if leaseno then
    requeue(P, host, level, id, now, grouped)
  end
end

-- 2. Sleeping hosts whose wake time has come are ready again (their back
-- queues waited, untouched, while they slept).
local woken = redis.call('ZRANGEBYSCORE', sleeping, '-inf', now, 'WITHSCORES', 'LIMIT', 0, refill_limit)
if #woken > 0 then
  local unsleep = batch('ZREM', sleeping)
  local wake = batch('ZADD', ready)
  for i = 1, #woken, 2 do
    push1(unsleep, woken[i])
    push2(wake, woken[i + 1], woken[i])
  end
  flush(unsleep)
  flush(wake)
end

-- 3. Refill, sized by need: hosts are opened (given a back queue) only while
-- fewer hosts are ready now than this call wants to claim, so the set of
-- awake hosts grows while fetch slots find no ready host and stops growing
-- (then shrinks as hosts run dry) once they do; max_awake bounds it (memory).
-- Entries of hosts that own a back queue move into it whenever they reach the
-- head of their front queue. The biased selector takes from the front
-- queues: a deterministic weighted round robin over a persistent counter:
-- level l gets weights[l] / sum(weights) of the picks when all are
-- non-empty, so low priority drains too; an empty pick falls through to the
-- other levels, highest first.
redis.call('ZREMRANGEBYSCORE', cool, '-inf', now)
local function host_of_entry(entry)
  return string.sub(entry, 1, string.find(entry, ' ', 1, true) - 1)
end
local function take(level, may_open)
  local queue = P .. K.front .. level
  if may_open then
    return redis.call('RPOP', queue)
  end
  local head = redis.call('LINDEX', queue, -1)
  if head and redis.call('SISMEMBER', active, host_of_entry(head)) == 1 then
    return redis.call('RPOP', queue)
  end
  return nil
end
local function pick_front(may_open)
  if not may_open then
    -- Only entries of hosts that own a back queue, highest level first; the
    -- selector's counter moves only when a host may be opened, so its
    -- weighted round robin decides which hosts are opened, and in which order.
    for l = 0, levels - 1 do
      local entry = take(l, false)
      if entry then
        return entry, l
      end
    end
    return nil, nil
  end
  local r = redis.call('INCR', P .. K.selector) % total_weight
  local chosen = levels - 1
  local acc = 0
  for l = 1, levels do
    acc = acc + weights[l]
    if r < acc then
      chosen = l - 1
      break
    end
  end
  local entry = take(chosen, may_open)
  if entry then
    return entry, chosen
  end
  for l = 0, levels - 1 do
    if l ~= chosen then
      entry = take(l, may_open)
      if entry then
        return entry, l
      end
    end
  end
  return nil, nil
end

local moved, opened = 0, 0
local need = 0
if max_claim > 0 then
  need = max_claim - redis.call('ZCOUNT', ready, '-inf', now)
end
local awake = nil
while moved < refill_limit do
  local may_open = false
  if opened < need then
    if awake == nil then
      awake = redis.call('SCARD', active) - redis.call('ZCARD', sleeping)
    end
    may_open = awake < max_awake
  end
  local entry, level = pick_front(may_open)
  if not entry then
    break
  end
  -- "<host> <id> <request>" (from enqueue) or "<host> <id>" (the request is
  -- already in the request hash: drained revisits, revived dead letters).
  local host = host_of_entry(entry)
  local space = #host + 1
  local second = string.find(entry, ' ', space + 1, true)
  local id
  if second then
    id = string.sub(entry, space + 1, second - 1)
    redis.call('HSET', P .. K.requests, id, string.sub(entry, second + 1))
  else
    id = string.sub(entry, space + 1)
  end
  redis.call('ZADD', P .. K.queue .. host, fmt(level * SCALE + tonumber(id)), id)
  if redis.call('SADD', active, host) == 1 then
    -- A host new to the active set: ready at once, unless it still rests
    -- from its last fetch (then ready later, or asleep beyond the horizon).
    local at = now
    local resting = redis.call('ZSCORE', cool, host)
    if resting then
      at = math.max(now, tonumber(resting))
      redis.call('ZREM', cool, host)
    end
    if at - now > horizon then
      redis.call('ZADD', sleeping, at, host)
    else
      redis.call('ZADD', ready, at, host)
      awake = (awake or 0) + 1
      if at <= now then
        opened = opened + 1
      end
    end
  end
  moved = moved + 1
end

-- 4. Claim: hosts whose time has come, earliest first, one URL each. A host
-- without a valid robots.txt decision (robots_first) is handed out as a
-- robots.txt lease instead: id 0, its first queued request's blob (for the
-- origin), the request left at the head of its queue. Each host's first
-- queued id is popped (or peeked), then all their requests are read with one
-- HMGET; a host whose id has no request (corrupt entry) pops its next one.
-- The hosts leave the ready heap and the leases are written in one command each.
local claimed = {}
local missing = 0
local taken = 0
if max_claim > 0 then
  -- (At most CHUNK hosts a call: the HMGET below is one unpack.)
  local hosts = redis.call('ZRANGEBYSCORE', ready, '-inf', now, 'LIMIT', 0, math.min(max_claim, CHUNK - 2))
  local group_of_host = {}
  if grouped and #hosts > 0 then
    -- One request at a time per group, and not before the group's next allowed
    -- time: a host whose group is in flight (or taken by this call) waits for
    -- it in the group's queue; one whose group rests is ready when it may go.
    local groups = redis.call('HMGET', P .. K.group, unpack(hosts))
    for index, host in ipairs(hosts) do
      groups[index] = groups[index] or host
    end
    local busy = redis.call('HMGET', P .. K.group_busy, unpack(groups))
    local next_of = redis.call('HMGET', P .. K.group_next, unpack(groups))
    local eligible, taken = {}, {}
    for index, host in ipairs(hosts) do
      local group = groups[index]
      if busy[index] or taken[group] then
        redis.call('ZREM', ready, host)
        redis.call('ZADD', P .. K.group_wait .. group, now, host)
      elseif next_of[index] and tonumber(next_of[index]) > now then
        redis.call('ZADD', ready, next_of[index], host)
      else
        taken[group] = true
        group_of_host[host] = group
        eligible[#eligible + 1] = host
      end
    end
    hosts = eligible
  end
  if #hosts > 0 then
    -- One lease number per host, reserved at once (a host without a URL leaves a gap).
    local first_lease = redis.call('INCRBY', P .. K.lease_sequence, #hosts) - #hosts
    local unready = batch('ZREM', ready)
    local new_leases = batch('ZADD', leases)
    local reqs = P .. K.requests
    local queue_of = function(host) return P .. K.queue .. host end
    -- A host's first queued id and its level (nil when its back queue is empty).
    local function pop(host)
      local popped = redis.call('ZPOPMIN', queue_of(host))
      if #popped == 0 then
        return nil
      end
      taken = taken + 1
      return popped[1], math.floor(tonumber(popped[2]) / SCALE)
    end
    local function peek(host)
      local first = redis.call('ZRANGE', queue_of(host), 0, 0, 'WITHSCORES')
      if #first == 0 then
        return nil
      end
      return first[1], math.floor(tonumber(first[2]) / SCALE)
    end
    local robots_due = {}
    if robots_first then
      local until_of = redis.call('HMGET', P .. K.host_robots, unpack(hosts))
      for index = 1, #hosts do
        robots_due[index] = not until_of[index] or tonumber(until_of[index]) <= now
      end
    end
    local ids, levels_of = {}, {}
    local lookup = {'HMGET', reqs}
    for index, host in ipairs(hosts) do
      push1(unready, host)
      local id, level
      if robots_due[index] then
        id, level = peek(host)
      else
        id, level = pop(host)
      end
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
          if robots_due[index] then
            redis.call('ZREM', queue_of(host), id)
            redis.call('DECR', P .. K.queued)
            id, level = peek(host)
          else
            id, level = pop(host)
          end
          if not id then
            break
          end
          blob = redis.call('HGET', reqs, id)
        end
      end
      if blob then
        if grouped then
          redis.call('HSET', P .. K.group_busy, group_of_host[host], host)
        end
        local leased_id = id
        if robots_due[index] then
          leased_id = ROBOTS_ID
        end
        local member = fmt(first_lease + index) .. ' ' .. level .. ' ' .. leased_id .. ' ' .. host
        push2(new_leases, lease_until, member)
        claimed[#claimed + 1] = member
        claimed[#claimed + 1] = blob
      else
        -- The back queue ran dry (only corrupt entries): the host leaves.
        redis.call('SREM', active, host)
        if grouped then
          free_group(P, host, now)
        end
      end
    end
    flush(unready)
    flush(new_leases)
  end
end
if taken > 0 then
  redis.call('DECRBY', P .. K.queued, taken)
end

local next_ready = redis.call('ZRANGE', ready, 0, 0, 'WITHSCORES')
local next_expiry = redis.call('ZRANGE', leases, 0, 0, 'WITHSCORES')
local next_wake = redis.call('ZRANGE', sleeping, 0, 0, 'WITHSCORES')
local next_at = next_ready[2] and tonumber(next_ready[2]) or -1
if next_wake[2] and (next_at < 0 or tonumber(next_wake[2]) < next_at) then
  next_at = tonumber(next_wake[2])
end
return {
  claimed,
  #expired,
  moved,
  next_at,
  next_expiry[2] and tonumber(next_expiry[2]) or -1,
  tonumber(redis.call('GET', P .. K.queued) or '0'),
  redis.call('ZCARD', leases),
  missing,
  opened,
  #woken / 2,
}
