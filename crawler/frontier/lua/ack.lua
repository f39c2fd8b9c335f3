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
-- Returns {acked, stale, requeued, dead, parked}.
local P = ARGV[1]
local now = tonumber(ARGV[2])
local throttle_base = tonumber(ARGV[3])
local throttle_max = tonumber(ARGV[4])
local park_after = tonumber(ARGV[5])
local park_base = tonumber(ARGV[6])
local park_max = tonumber(ARGV[7])
local leases = KEYS[1]
local acked, stale, requeued, dead, parked = 0, 0, 0, 0, 0
for i = 8, #ARGV, 9 do
  local member = ARGV[i]
  if redis.call('ZREM', leases, member) == 1 then
    local leaseno, level, id, host = parse_member(member)
    if leaseno then
      local completed = tonumber(ARGV[i + 2])
      local action = tonumber(ARGV[i + 3])
      local blob = ARGV[i + 5]
      local signal = tonumber(ARGV[i + 6])
      local at = tonumber(ARGV[i + 1])
      local floor = redis.call('HGET', P .. 'hostdelay', host)
      if floor then
        at = math.max(at, completed + tonumber(floor))
      end
      if signal == 1 then
        local throttle = redis.call('HINCRBY', P .. 'hostthrottle', host, 1)
        at = math.max(at, completed + math.min(throttle_max, throttle_base * 2 ^ (throttle - 1)))
      elseif signal == 2 then
        local failures = redis.call('HINCRBY', P .. 'hostfail', host, 1)
        if failures >= park_after then
          at = math.max(at, completed + math.min(park_max, park_base * 2 ^ (failures - park_after)))
          parked = parked + 1
        end
      elseif signal == 0 then
        if redis.call('HEXISTS', P .. 'hostthrottle', host) == 1 then
          if redis.call('HINCRBY', P .. 'hostthrottle', host, -1) <= 0 then
            redis.call('HDEL', P .. 'hostthrottle', host)
          end
        end
        redis.call('HDEL', P .. 'hostfail', host)
      end
      if action == 1 then
        if blob ~= '' then
          redis.call('HSET', P .. 'req', id, blob)
        end
        redis.call('ZADD', P .. 'q:' .. host, fmt(level * SCALE + tonumber(id)), id)
        redis.call('INCR', P .. 'queued')
        at = math.max(at, tonumber(ARGV[i + 4]))
        requeued = requeued + 1
      elseif action == 2 then
        if blob == '' then
          blob = redis.call('HGET', P .. 'req', id) or ''
        end
        redis.call('HDEL', P .. 'req', id)
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
        redis.call('HDEL', P .. 'req', id)
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
return {acked, stale, requeued, dead, parked}
