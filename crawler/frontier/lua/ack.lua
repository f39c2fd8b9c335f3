-- Complete leases: apply each one's outcome (done, requeue or dead letter)
-- and give the host its next allowed time. Idempotent: a lease that is no
-- longer held (acked before, or expired and handed to another worker)
-- changes nothing.
-- KEYS[1]: the shard's lease set
-- ARGV[1]: P; ARGV[2]: now_ms;
-- ARGV[3..7]: throttle_base_ms, throttle_max_ms, park_after, park_base_ms, park_max_ms
-- then 9 values per lease: member, next_allowed_ms, completed_ms, action
--   (0 done, 1 requeue, 2 dead letter), not_before_ms, blob ('' = keep the
--   stored request), host signal (0 ok, 1 throttled, 2 failed, 3 neutral),
--   dead-letter info ("error\tmessage"), URL metadata field ('' = none: a
--   dead letter's URL is then marked dead in the URL metadata store, whose
--   record layout is documented in crawler/metadata/store.py).
-- next_allowed_ms is the politeness policy's answer; the host's floor
-- (P..'hostdelay', ms, set by robots.txt Crawl-delay), its throttle level
-- (429/503) and its consecutive failures can only raise it.
-- Redis CPU is the frontier's shared resource: the leases held, the hosts'
-- delay floors and throttle levels are read with one command each per chunk
-- of leases, and the lease removals, request deletions, failure resets and
-- ready times are written with one command each. This relies on the
-- frontier's invariant that a host has at most one lease held at a time.
-- Returns {acked, stale, requeued, dead, parked}.
local P = ARGV[1]
local now = tonumber(ARGV[2])
local throttle_base = tonumber(ARGV[3])
local throttle_max = tonumber(ARGV[4])
local park_after = tonumber(ARGV[5])
local park_base = tonumber(ARGV[6])
local park_max = tonumber(ARGV[7])
local leases = KEYS[1]
local reqs = P .. 'req'
local throttles = P .. 'hostthrottle'
local failures_of = P .. 'hostfail'
local PER = 1000  -- leases per chunk: each read below is one unpack
local acked, stale, requeued, dead, parked = 0, 0, 0, 0, 0
local once = {}  -- members completed by this call: a repeat is stale
local forget = batch('HDEL', reqs)
local recovered = batch('HDEL', failures_of)
local next_ready = batch('ZADD', P .. 'ready')

local function complete(i, id, level, host, floor, throttled)
  local completed = tonumber(ARGV[i + 2])
  local action = tonumber(ARGV[i + 3])
  local blob = ARGV[i + 5]
  local signal = tonumber(ARGV[i + 6])
  local at = tonumber(ARGV[i + 1])
  if floor then
    at = math.max(at, completed + tonumber(floor))
  end
  if signal == 1 then
    local throttle = redis.call('HINCRBY', throttles, host, 1)
    at = math.max(at, completed + math.min(throttle_max, throttle_base * 2 ^ (throttle - 1)))
  elseif signal == 2 then
    local failures = redis.call('HINCRBY', failures_of, host, 1)
    if failures >= park_after then
      at = math.max(at, completed + math.min(park_max, park_base * 2 ^ (failures - park_after)))
      parked = parked + 1
    end
  elseif signal == 0 then
    if throttled then
      if redis.call('HINCRBY', throttles, host, -1) <= 0 then
        redis.call('HDEL', throttles, host)
      end
    end
    push1(recovered, host)
  end
  if action == 1 then
    if blob ~= '' then
      redis.call('HSET', reqs, id, blob)
    end
    redis.call('ZADD', P .. 'q:' .. host, fmt(level * SCALE + tonumber(id)), id)
    redis.call('INCR', P .. 'queued')
    at = math.max(at, tonumber(ARGV[i + 4]))
    requeued = requeued + 1
  elseif action == 2 then
    if blob == '' then
      blob = redis.call('HGET', reqs, id) or ''
    end
    redis.call('HDEL', reqs, id)
    redis.call('HSET', P .. 'dead', id, blob)
    redis.call('HSET', P .. 'deadinfo', id, host .. '\t' .. level .. '\t' .. now .. '\t' .. ARGV[i + 7])
    dead = dead + 1
    -- A fetch given up on: an error in the host's quality counters.
    redis.call('HINCRBY', P .. 'hostq', host .. '|n', 1)
    redis.call('HINCRBY', P .. 'hostq', host .. '|e', 1)
    local field = ARGV[i + 8]
    if field ~= '' then
      local metadata = P .. 'urlmeta:' .. host
      local old = redis.call('HGET', metadata, field)
      local record
      if old then
        record = cmsgpack.unpack(old)
      else
        record = {1, 0, 0, 0, "", "", "", 0, 0, 0, 0, 0, 0, 0}
      end
      record[2] = 3  -- UrlState.DEAD
      record[3] = math.floor(now / 1000)
      redis.call('HSET', metadata, field, cmsgpack.pack(record))
    end
  else
    push1(forget, id)
  end
  if redis.call('ZCARD', P .. 'q:' .. host) > 0 then
    push2(next_ready, fmt(at), host)
  else
    redis.call('SREM', P .. 'active', host)
    redis.call('ZADD', P .. 'cool', fmt(at), host)
  end
end

for start = 8, #ARGV, 9 * PER do
  local last = math.min(#ARGV, start + 9 * PER - 1)
  -- Which of these leases are still held (ZMSCORE), then their hosts' floors and throttles.
  local members = {'ZMSCORE', leases}
  for i = start, last, 9 do
    members[#members + 1] = ARGV[i]
  end
  local scores = redis.call(unpack(members))
  local held, release = {}, batch('ZREM', leases)
  local hosts = {}
  for j = 1, #members - 2 do
    local index = start + (j - 1) * 9
    local member = ARGV[index]
    if scores[j] and not once[member] then
      once[member] = true
      push1(release, member)
      local leaseno, level, id, host = parse_member(member)
      if leaseno then
        held[#held + 1] = {index, id, level, host}
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
    local floor_of = redis.call('HMGET', P .. 'hostdelay', unpack(hosts))
    local throttled_of = redis.call('HMGET', throttles, unpack(hosts))
    for n, lease in ipairs(held) do
      complete(lease[1], lease[2], lease[3], lease[4], floor_of[n], throttled_of[n])
      acked = acked + 1
    end
  end
end
flush(forget)
flush(recovered)
flush(next_ready)
return {acked, stale, requeued, dead, parked}
