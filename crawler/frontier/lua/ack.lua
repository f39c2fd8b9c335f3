#!lua
-- Complete leases: apply each one's outcome (done, requeue or dead letter)
-- and give the host its next allowed time. Idempotent: a lease that is no
-- longer held (acked before, or expired and handed to another worker)
-- changes nothing.
-- KEYS[1]: the shard's lease set
-- ARGV: the message ACK of crawler/crawlstate/protocol.py, read by name (ACK.<field>):
-- P; now_ms; throttle_base_ms, throttle_max_ms, park_after, park_base_ms,
-- park_max_ms; the sleep horizon (ms); grouped (1: politeness groups, see
-- frontier/lua/hosts.lua: the group's clock is set from the politeness delay and floor of
-- the fetch, its longest-waiting host is ready next, and this one queues
-- behind the others); the priority levels; URL records per bucket (linear
-- hashing); requests in flight per host at most (per_key: k,
-- FRONTIER_CONCURRENCY_PER_KEY; k > 1: each of the host's slots keeps its own
-- politeness clock, see slots_parse in hosts.lua); slot_limited: 1 if some keys
-- have a k of their own (DOWNLOAD_SLOTS, P..K.slot_limit)
-- then, from ACK.items, the ACK_ITEM fields of each lease: member,
--   next_allowed_ms (0: the request never reached the host, which may be
--   contacted again at once), completed_ms, action (0 done, 1 requeue, 2 dead
--   letter), not_before_ms, blob ('' = keep the stored request), host signal
--   (0 ok, 1 throttled, 2 failed, 3 neutral, 4 silent: failed in a way that
--   parks the host at once, 5 robots.txt decision missing for the request's
--   origin: the host's robots.txt is fetched first again), dead-letter info
--   ("error\tmessage"), URL key ('' = none: a dead letter's URL is then marked
--   dead in its URL record, made if there is none; its layout is URLREC, see
--   crawler/crawlstate/schema.py).
-- A dead letter keeps its request: the stored entry, a revisit ("@<URL key>")
-- resolved to "#" and its record; its number is a new lease number.
-- next_allowed_ms is the politeness policy's answer; the host's floor
-- (P..'hostdelay', ms, set by robots.txt Crawl-delay), its throttle level
-- (429/503), its consecutive failures and the lease's not_before can only
-- raise it. A host whose next allowed time is more than the sleep horizon
-- away sleeps (P..'sleep') with its back queue until then, outside the set
-- of awake hosts; a host whose back queue is empty leaves the active set.
-- A robots.txt lease (id ROBOTS_ID) is done (its host's first request stayed
-- queued), or given up on: then the host's queued requests are dead-lettered
-- (at most 1000 a lease; the next robots.txt lease of the host decides again).
-- Redis CPU is the frontier's shared resource: the leases held, the hosts'
-- delay floors and throttle levels are read with one command each per chunk
-- of leases, and the lease removals, request deletions, failure resets and
-- ready times are written with one command each. This relies on the
-- frontier's invariant that a host has at most one lease held at a time
-- (k = 1; with k > 1 a host's ready time is read and written per lease).
-- Returns ACK's reply: {acked, stale, requeued, dead, parked}.
local P = ARGV[ACK.prefix]
local now = tonumber(ARGV[ACK.now_ms])
local throttle_base = tonumber(ARGV[ACK.throttle_base_ms])
local throttle_max = tonumber(ARGV[ACK.throttle_max_ms])
local park_after = tonumber(ARGV[ACK.park_after])
local park_base = tonumber(ARGV[ACK.park_base_ms])
local park_max = tonumber(ARGV[ACK.park_max_ms])
local horizon = tonumber(ARGV[ACK.horizon_ms])
local grouped = ARGV[ACK.grouped] == '1'
local levels = tonumber(ARGV[ACK.levels])
local records  -- the URL records' state, read when first needed (a dead letter: most calls have none)
local function opened()
  records = records or urls_open(P, tonumber(ARGV[ACK.records_load]))
  return records
end
local per_key = tonumber(ARGV[ACK.per_key])
local k_of = slot_limits(P, per_key, ARGV[ACK.slot_limited] == '1')
local leases = KEYS[1]
local leased = P .. K.leased
local throttles = P .. K.host_throttle
local failures_of = P .. K.host_failures
local PER = 1000  -- leases per chunk: each read below is one unpack
local DEAD_BATCH = 1000  -- queued requests a robots.txt lease given up on dead-letters
local acked, stale, requeued, dead, parked = 0, 0, 0, 0, 0
local once = {}  -- members completed by this call: a repeat is stale
local forget = batch('HDEL', leased)
local recovered = batch('HDEL', failures_of)
local unparked = batch('SREM', P .. K.parked)
local next_ready = batch('ZADD', P .. K.ready)

local function park(host, at, completed, failures)
  parked = parked + 1
  redis.call('SADD', P .. K.parked, host)
  return math.max(at, completed + math.min(park_max, park_base * 2 ^ (failures - park_after)))
end

-- A queue entry as a dead letter keeps it: a revisit resolved to its record.
local function resolved(entry)
  if entry and string.byte(entry, 1) == 64 then
    local key = string.sub(entry, 2)
    local record = redis.call('HGET', lh_key(opened(), lh_hash(key)), key)
    return record and ('#' .. record_external(P, record)) or ''
  end
  return entry or ''
end

local function dead_letter(host, level, entry, info)
  local id = fmt(redis.call('INCR', P .. K.lease_sequence))
  redis.call('HSET', P .. K.dead, id, resolved(entry))
  redis.call('HSET', P .. K.dead_info, id, host .. '\t' .. small_decimal(level) .. '\t' .. fmt(now) .. '\t' .. info)
end

local function complete(i, leaseno, id, level, host, floor, throttled)
  local completed = ARGV[i + ACK_ITEM.completed_ms] + 0
  local action = num(ARGV[i + ACK_ITEM.action])
  local blob = ARGV[i + ACK_ITEM.blob]
  local signal = num(ARGV[i + ACK_ITEM.host_signal])
  local at = ARGV[i + ACK_ITEM.next_allowed_ms] + 0
  local contacted = at ~= 0
  if not contacted then
    at = completed  -- never contacted: no politeness delay, no floor
  elseif floor then
    at = math.max(at, completed + tonumber(floor))
  end
  local group = grouped and group_of(P, host) or host
  local k = k_of(group)
  local slot_at = at  -- k > 1: when this answer's slot is free again (its own clock)
  local n, spacing, start, hold, frees
  if k > 1 then
    n, spacing, start, hold, frees = slots_get(P, host)
    n = n - 1
    if floor and tonumber(floor) > (spacing or 0) then
      spacing = tonumber(floor)  -- Crawl-delay spaces the host's starts, whatever k
    end
    if grouped and contacted then
      -- The group's starts: spaced by this answer's delay shared among its k slots.
      at = (start or completed) + math.floor((at - completed) / k)
    end
  end
  local polite_at = at  -- the group's next allowed time (not this host's backoff)
  if id == ROBOTS_ID then
    -- A robots.txt lease is done, unless given up on (robots.txt unreachable
    -- too often, an undecodable request): then the host's queued requests go
    -- to the dead letters, DEAD_BATCH at most per lease.
    if action == 2 then
      local n = 0
      for l = 0, levels - 1 do
        while n < DEAD_BATCH do
          local entry = redis.call('RPOP', back_key(P, host, l))
          if not entry then
            break
          end
          dead_letter(host, l, entry, ARGV[i + ACK_ITEM.dead_info])
          n = n + 1
        end
      end
      if n > 0 then
        redis.call('DECRBY', P .. K.queued, n)
        redis.call('HINCRBY', P .. K.host_quality, host .. '|n', n)
        redis.call('HINCRBY', P .. K.host_quality, host .. '|e', n)
      end
      dead = dead + n
    end
    action = 0
  end
  if signal == 1 then
    local throttle = redis.call('HINCRBY', throttles, host, 1)
    at = math.max(at, completed + math.min(throttle_max, throttle_base * 2 ^ (throttle - 1)))
  elseif signal == 2 then
    local failures = redis.call('HINCRBY', failures_of, host, 1)
    if failures >= park_after then
      at = park(host, at, completed, failures)
    end
  elseif signal == 4 then
    local failures = math.max(redis.call('HINCRBY', failures_of, host, 1), park_after)
    redis.call('HSET', failures_of, host, failures)
    at = park(host, at, completed, failures)
  elseif signal == 5 then
    redis.call('HDEL', P .. K.host_robots, host)
  elseif signal == 0 then
    if throttled then
      if redis.call('HINCRBY', throttles, host, -1) <= 0 then
        redis.call('HDEL', throttles, host)
      end
    end
    push1(recovered, host)
    push1(unparked, host)
  end
  at = math.max(at, num(ARGV[i + ACK_ITEM.not_before_ms]))
  local entry = nil
  if id ~= ROBOTS_ID then
    if action ~= 0 then
      entry = redis.call('HGET', leased, leaseno)  -- (a lease done forgets it unread)
    end
    push1(forget, leaseno)
  end
  if action == 1 then
    if blob ~= '' then
      entry = blob
    end
    if entry then
      redis.call('RPUSH', back_key(P, host, level), entry)
      redis.call('INCR', P .. K.queued)
      requeued = requeued + 1
    end
  elseif action == 2 then
    if blob ~= '' then
      entry = blob
    end
    dead_letter(host, level, entry, ARGV[i + ACK_ITEM.dead_info])
    dead = dead + 1
    -- A fetch given up on: an error in the host's quality counters.
    redis.call('HINCRBY', P .. K.host_quality, host .. '|n', 1)
    redis.call('HINCRBY', P .. K.host_quality, host .. '|e', 1)
    local key = ARGV[i + ACK_ITEM.record_key]
    if key ~= '' then
      local bucket = lh_key(opened(), lh_hash(key))
      local old = redis.call('HGET', bucket, key)
      local record
      if old then
        record = record_unpack(old)
      else
        record = record_empty()
        records.added = records.added + 1
      end
      record[URLREC.state] = URL_STATE.DEAD
      record[URLREC.fetched_at] = math.floor(now / 1000)
      redis.call('HSET', bucket, key, record_pack(record))
    end
  end
  local waiter = false
  if grouped then
    local _
    _, waiter = free_group(P, host, polite_at, k, group)
  end
  if k > 1 then
    -- This answer's slot cools until slot_at; a backoff beyond it (429, 503,
    -- parking, Retry-After) holds the whole host. The host may be in the heap
    -- (below k) or asleep (a sibling's backoff): it is placed again below, at
    -- its next start.
    if at > slot_at then
      hold = math.max(hold, at)
    end
    if contacted then
      frees[#frees + 1] = slot_at
    end
    hold, frees = slots_prune(now, hold, frees)
    at = math.max(slots_next(now, k, n, spacing, start, hold, frees) or at, now)
    redis.call('ZREM', P .. K.ready, host)
    redis.call('ZREM', P .. K.sleeping, host)
    if grouped then
      redis.call('ZREM', P .. K.group_wait .. group, host)  -- placed below, ready or asleep
    end
  end
  local dry = back_empty(P, host, levels)
  if dry or at - completed > horizon then
    if dry then
      redis.call('SREM', P .. K.active, host)
      push1(unparked, host)
      redis.call('ZADD', P .. K.cool, fmt(at), host)
    else
      redis.call('ZADD', P .. K.sleeping, fmt(at), host)
    end
    -- Out of the ready heap: the slots are kept only while requests are in flight.
    if k > 1 and n > 0 then
      slots_set(P, host, n, spacing, start, hold, frees)
    elseif k > 1 then
      slots_drop(P, host)
    end
  elseif k > 1 then
    redis.call('ZADD', P .. K.ready, fmt(at), host)
    slots_set(P, host, n, spacing, start, hold, frees)
  elseif waiter then
    -- Its group's other hosts go first: this one queues behind them.
    redis.call('ZADD', P .. K.group_wait .. group, fmt(completed), host)
  else
    push2(next_ready, fmt(at), host)
  end
end

local width = ACK_ITEM.width
for start = ACK.items, #ARGV, width * PER do
  local last = math.min(#ARGV, start + width * PER - 1)
  -- Which of these leases are still held (ZMSCORE), then their hosts' floors and throttles.
  local members = {'ZMSCORE', leases}
  for i = start, last, width do
    members[#members + 1] = ARGV[i + ACK_ITEM.member]
  end
  local scores = redis.call(unpack(members))
  local held, release = {}, batch('ZREM', leases)
  local hosts = {}
  for j = 1, #members - 2 do
    local index = start + (j - 1) * width
    local member = ARGV[index + ACK_ITEM.member]
    if scores[j] and not once[member] then
      once[member] = true
      push1(release, member)
      local leaseno, level, id, host = parse_member(member)
      if leaseno then
        held[#held + 1] = {index, leaseno, id, level, host}
        hosts[#hosts + 1] = host
      else
        acked = acked + 1  -- held but unreadable: forgotten
      end
    else
      stale = stale + 1
    end
  end
  flush(release)
  if #held > 0 then
    local floor_of = redis.call('HMGET', P .. K.host_delay, unpack(hosts))
    local throttled_of = redis.call('HMGET', throttles, unpack(hosts))
    for n, lease in ipairs(held) do
      complete(lease[1], lease[2], lease[3], lease[4], lease[5], floor_of[n], throttled_of[n])
      acked = acked + 1
    end
  end
end
flush(forget)
flush(recovered)
flush(unparked)
flush(next_ready)
if records then
  lh_close(records)
end
return {acked, stale, requeued, dead, parked}
