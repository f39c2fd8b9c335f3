#!lua
-- Expire leases, wake sleeping hosts, open hosts as the claim needs them, and
-- claim URLs of ready hosts under a lease: one URL per host, one lease per URL.
-- KEYS[1]: the shard's lease set (anchors the script to the shard's slot)
-- ARGV: the message CLAIM of crawler/crawlstate/protocol.py, read by name (CLAIM.<field>):
--       P, now_ms, max_claim, lease_until_ms, max_awake, refill_limit,
--       expire_limit, sleep_horizon_ms, robots_first (1: a host's robots.txt
--       decision must exist before its pages are handed out), grouped (1:
--       politeness groups, see frontier/lua/hosts.lua), URL records per bucket (linear
--       hashing), requests in flight per host at most (k,
--       FRONTIER_CONCURRENCY_PER_KEY; k > 1: see slots_parse in hosts.lua), the
--       minimum delay (ms; a host with k > 1 spaces its starts by it / k before
--       its first answer), 1 if some keys have a k of their own (DOWNLOAD_SLOTS,
--       P..K.slot_limit), then from CLAIM.items the front-queue weights (CLAIM_ITEM),
--       highest priority first.
-- A queue entry is a stored request, or "@<URL key>": a revisit, whose
-- request is built from the URL's record; it is handed out as "#" followed
-- by the record (a revisit whose record is gone counts as missing).
-- Returns CLAIM's reply: {claimed (flat member, blob pairs), expired, moved, next_ready_ms,
--          next_lease_expiry_ms, queued, leased, missing, opened, woken}.
local P = ARGV[CLAIM.prefix]
local now = tonumber(ARGV[CLAIM.now_ms])
local max_claim = tonumber(ARGV[CLAIM.max_claim])
local lease_until = ARGV[CLAIM.lease_until_ms]
local max_awake = tonumber(ARGV[CLAIM.max_awake])
local refill_limit = tonumber(ARGV[CLAIM.refill_limit])
local expire_limit = tonumber(ARGV[CLAIM.expire_limit])
local horizon = tonumber(ARGV[CLAIM.horizon_ms])
local robots_first = ARGV[CLAIM.robots_first] == '1'
local grouped = ARGV[CLAIM.grouped] == '1'
local records  -- the URL records' state, read at the first revisit (most calls have none)
local per_key = tonumber(ARGV[CLAIM.per_key])
local min_delay = tonumber(ARGV[CLAIM.min_delay_ms])
local k_of = slot_limits(P, per_key, ARGV[CLAIM.slot_limited] == '1')
local weights = {}
local total_weight = 0
for i = CLAIM.items, #ARGV, CLAIM_ITEM.width do
  local weight = tonumber(ARGV[i + CLAIM_ITEM.weight])
  weights[#weights + 1] = weight
  total_weight = total_weight + weight
end
local levels = #weights

local leases = KEYS[1]
local leased = P .. K.leased
local ready = P .. K.ready
local active = P .. K.active
local cool = P .. K.cool
local sleeping = P .. K.sleeping
-- The ready heap and the leases stay skip lists (ZSET_ANCHOR, crawler/crawlstate/schema.py).
redis.call('ZADD', ready, 'NX', 'inf', ZSET_ANCHOR)
redis.call('ZADD', leases, 'NX', 'inf', ZSET_ANCHOR)

-- 1. Leases whose worker died (or stalled) give their URL and host back. The host is ready again a
-- politeness delay later (the minimum delay, or its floor if higher: robots.txt Crawl-delay): a
-- worker that lost Redis may have a request of it that has just ended (a worker hands out nothing
-- whose lease may have lapsed, crawler/frontier/inhand.py; one already under way is not stopped).
local expired = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, expire_limit)
for _, member in ipairs(expired) do
  redis.call('ZREM', leases, member)
  local leaseno, level, id, host = parse_member(member)
  if leaseno then
    local floor = tonumber(redis.call('HGET', P .. K.host_delay, host) or '0')
    requeue(P, leaseno, id, host, level, fmt(now + math.max(min_delay, floor)), grouped, k_of)
  end
end

-- 2. Sleeping hosts whose wake time has come are ready again (their back
-- queues waited, untouched, while they slept).
local waking = redis.call('ZRANGEBYSCORE', sleeping, '-inf', now, 'WITHSCORES', 'LIMIT', 0, refill_limit)
if #waking > 0 then
  local unsleep = batch('ZREM', sleeping)
  local wake = batch('ZADD', ready)
  for i = 1, #waking, 2 do
    push1(unsleep, waking[i])
    push2(wake, waking[i + 1], waking[i])
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
  local queue = P .. K.front .. small_decimal(level)
  if may_open then
    return redis.call('RPOP', queue)
  end
  local head = redis.call('LINDEX', queue, '-1')
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
  -- "<host> <entry>": the entry joins the tail of its host's back queue.
  local host = host_of_entry(entry)
  redis.call('LPUSH', back_key(P, host, level), string.sub(entry, #host + 2))
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
-- robots.txt lease instead: id 0, its first queued request (for the origin),
-- the request left at the head of its queue. A revisit entry is handed out
-- as its URL record; one whose record is gone is dropped (missing). The hosts
-- leave the ready heap and the leases are written in one command each.
local claimed = {}
local missing = 0
local taken = 0
if max_claim > 0 then
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
    local eligible, taken_group = {}, {}
    for index, host in ipairs(hosts) do
      local group = groups[index]
      local k = k_of(group)
      -- (k = 1: the busy value is the host in flight; k > 1: the group's requests in flight.)
      local full = busy[index] and (k == 1 or tonumber(busy[index]) >= k)
      if full or (taken_group[group] and k == 1) then
        redis.call('ZREM', ready, host)
        redis.call('ZADD', P .. K.group_wait .. group, now, host)
      elseif taken_group[group] then
        -- k > 1: one start per group per call; the next one a spacing later.
        redis.call('ZADD', ready, fmt(now + math.floor(min_delay / k)), host)
      elseif next_of[index] and tonumber(next_of[index]) > now then
        redis.call('ZADD', ready, next_of[index], host)
      else
        taken_group[group] = true
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
    local held = batch('HSET', leased)
    local robots_due = {}
    if robots_first then
      local until_of = redis.call('HMGET', P .. K.host_robots, unpack(hosts))
      for index = 1, #hosts do
        robots_due[index] = not until_of[index] or tonumber(until_of[index]) <= now
      end
    end
    -- k > 1: a host at k requests in flight (or with any in flight while its
    -- robots.txt is due) leaves the heap until an ack; one below k stays in
    -- it, at its next start (written after the removals below).
    local in_flight, stays = {}, {}
    local limited = per_key > 1 or ARGV[CLAIM.slot_limited] == '1'
    if limited then
      in_flight = redis.call('HMGET', P .. K.slots, unpack(hosts))
    end
    for index, host in ipairs(hosts) do
      push1(unready, host)
      local entry, level, blob
      local k = limited and k_of(group_of_host[host] or host) or 1
      local n, spacing, start, hold, frees = 0, nil, nil, 0, {}
      if k > 1 then
        n, spacing, start, hold, frees = slots_parse(in_flight[index])
        hold, frees = slots_prune(now, hold, frees)
      end
      local full = n >= k or (n > 0 and robots_due[index])
      while not full do
        if robots_due[index] then
          entry, level = back_peek(P, host, levels)
        else
          entry, level = back_pop(P, host, levels)
          if entry then
            taken = taken + 1
          end
        end
        if not entry then
          break
        end
        blob = entry
        if string.byte(entry, 1) == 64 then  -- '@': a revisit of a URL record
          local key = string.sub(entry, 2)
          records = records or urls_open(P, tonumber(ARGV[CLAIM.records_load]))
          local record = redis.call('HGET', lh_key(records, lh_hash(key)), key)
          blob = record and ('#' .. record_external(P, record)) or nil
        end
        if blob then
          break
        end
        missing = missing + 1
        if robots_due[index] then
          redis.call('RPOP', back_key(P, host, level))
          taken = taken + 1
        end
      end
      if full then
        -- (no lease: an ack of this host's requests puts it back)
      elseif blob then
        if k > 1 then
          spacing = spacing or math.floor(min_delay / k)
          if n + #frees >= k and #frees > 0 then
            table.remove(frees, 1)  -- (no slot free now: the one that cooled first)
          end
          if not robots_due[index] and n + 1 < k then
            stays[#stays + 1] = fmt(slots_next(now, k, n + 1, spacing, now, hold, frees))
            stays[#stays + 1] = host
          end
          slots_set(P, host, n + 1, spacing, now, hold, frees)
        end
        if grouped and k > 1 then
          local group = group_of_host[host]
          redis.call('HINCRBY', P .. K.group_busy, group, 1)
          redis.call('HSET', P .. K.group_next, group, fmt(now + spacing))
        elseif grouped then
          redis.call('HSET', P .. K.group_busy, group_of_host[host], host)
        end
        local leaseno = fmt(first_lease + index)
        local leased_id = leaseno
        if robots_due[index] then
          leased_id = ROBOTS_ID
        else
          push2(held, leaseno, entry)
        end
        local member = leaseno .. ' ' .. small_decimal(level) .. ' ' .. leased_id .. ' ' .. host
        push2(new_leases, lease_until, member)
        claimed[#claimed + 1] = member
        claimed[#claimed + 1] = blob
      else
        -- The back queue ran dry (only missing revisits): the host leaves.
        redis.call('SREM', active, host)
        if k > 1 and n == 0 then
          slots_drop(P, host)
        end
        if grouped and k == 1 then
          -- (k > 1: the group's count never took this host; hosts wait only for a full group,
          -- whose acks let them go)
          free_group(P, host, now, k, group_of_host[host])
        end
      end
    end
    flush(unready)
    if #stays > 0 then
      redis.call('ZADD', ready, unpack(stays))
    end
    flush(held)
    flush(new_leases)
  end
end
if taken > 0 then
  redis.call('DECRBY', P .. K.queued, taken)
end

local next_ready = redis.call('ZRANGE', ready, '0', '0', 'WITHSCORES')
local next_expiry = redis.call('ZRANGE', leases, '0', '0', 'WITHSCORES')
local next_wake = redis.call('ZRANGE', sleeping, '0', '0', 'WITHSCORES')
local next_at = next_ready[1] ~= ZSET_ANCHOR and next_ready[2] and tonumber(next_ready[2]) or -1
if next_wake[2] and (next_at < 0 or tonumber(next_wake[2]) < next_at) then
  next_at = tonumber(next_wake[2])
end
local next_ready_ms = next_at
local next_expiry_ms = next_expiry[1] ~= ZSET_ANCHOR and next_expiry[2] and tonumber(next_expiry[2]) or -1
local queued = tonumber(redis.call('GET', P .. K.queued) or '0')
local leased = redis.call('ZCARD', leases) - 1  -- not the anchor
local woken = #waking / 2
return {claimed, #expired, moved, next_ready_ms, next_expiry_ms, queued, leased, missing, opened, woken}
