-- The frontier's hosts: lease members, back queues, politeness groups, request slots and giving a
-- lease's entry back. Every key starts with the shard prefix P, which carries the shard's hash tag
-- (crawler/crawlstate/keys.py).

-- A lease member is "<leaseno> <level> <id> <host>": id is the lease number
-- itself, or ROBOTS_ID for a robots.txt lease.
local function parse_member(member)
  local leaseno, level, id, host = string.match(member, '^(%d+) (%d+) (%d+) (%S+)$')
  if not leaseno then
    return nil
  end
  return leaseno, level + 0, id, host
end

-- The request id of a robots.txt lease: the host's robots.txt, fetched before
-- its pages (lease numbers start at 1). Its request stays queued meanwhile.
local ROBOTS_ID = '0'

-- Back queues: one list per host and level, P..K.queue..'<host>:<level>';
-- entries enter at the left (LPUSH) and leave at the right (RPOP): FIFO; a
-- request given back returns to the right (the head). A host's queue is empty
-- when none of its level lists exists.
local function back_base(P, host)
  return P .. K.queue .. host .. ':'
end

local function back_key(P, host, level)
  return back_base(P, host) .. small_decimal(level)
end

-- A host's back-queue keys as the arguments of the LMPOP that pops its next entry: {'LMPOP', levels,
-- the key of level 0 .. the key of level levels - 1, 'RIGHT'} (a key's level l is at l + 3), built
-- once per host and level count, kept in a bounded memo of two generations: the hosts of the last
-- BACK_KEYS_MAX to 2 * BACK_KEYS_MAX built, about 0.7 KB each in the functions' Lua memory (6 MB at
-- most); a host claimed is acked moments later. Library locals outlive a call, and the library
-- serves every crawl on the server: a key is the same text for the same shard prefix, host and
-- level, whatever the crawl's state.
local BACK_KEYS, BACK_KEYS_OLD, BACK_KEYS_COUNT, BACK_KEYS_MAX = {}, {}, 0, 4096

local function back_keys(P, host, levels)
  local base = back_base(P, host)
  local keys = BACK_KEYS[base]
  if keys and keys.levels == levels then
    return keys
  end
  keys = BACK_KEYS_OLD[base]
  if not (keys and keys.levels == levels) then
    keys = {'LMPOP', small_decimal(levels), levels = levels}
    for level = 0, levels - 1 do
      keys[level + 3] = base .. small_decimal(level)
    end
    keys[levels + 3] = 'RIGHT'
  end
  if BACK_KEYS_COUNT >= BACK_KEYS_MAX then
    BACK_KEYS_OLD, BACK_KEYS, BACK_KEYS_COUNT = BACK_KEYS, {}, 0
  end
  BACK_KEYS[base], BACK_KEYS_COUNT = keys, BACK_KEYS_COUNT + 1
  return keys
end

-- The next entry of a host's back queue, highest level first, with its level: one LMPOP over the
-- levels (a host's entries are mostly below level 0, where an RPOP per level costs a command each).
local function back_pop(P, host, levels)
  local keys = back_keys(P, host, levels)
  local popped = redis.call(unpack(keys, 1, levels + 3))
  if popped then
    local name = popped[1]
    for level = 0, levels - 1 do
      if keys[level + 3] == name then
        return popped[2][1], level
      end
    end
  end
  return nil, nil
end

local function back_peek(P, host, levels)
  local keys = back_keys(P, host, levels)
  for level = 0, levels - 1 do
    local entry = redis.call('LINDEX', keys[level + 3], '-1')
    if entry then
      return entry, level
    end
  end
  return nil, nil
end

local function back_empty(P, host, levels)
  return redis.call('EXISTS', unpack(back_keys(P, host, levels), 3, levels + 2)) == 0
end

-- Politeness groups (FRONTIER_POLITENESS_KEY "domain" or "ip"): the hosts of
-- a group share one clock (P..'gnext': group -> next allowed ms) and one
-- request in flight (P..'gbusy': group -> the host in flight; with
-- FRONTIER_CONCURRENCY_PER_KEY k > 1, up to k: group -> how many, their starts
-- spaced by the delay through the group's clock). A ready host
-- whose group is busy waits in P..'gwait:<group>' (a queue of hosts by the
-- time they started waiting) until the group's request ends. P..'group'
-- maps a host to its group (written at enqueue); a host without one is a
-- group of its own.
local function group_of(P, host)
  return redis.call('HGET', P .. K.group, host) or host
end

-- The group's request ended: the group may be contacted again at `at`, and
-- the host that waited longest for it is ready then (it goes first).
-- Returns the group and whether a waiting host was made ready.
local function free_group(P, host, at, per_key, group)
  group = group or group_of(P, host)
  if per_key > 1 then
    -- k > 1: P..'gbusy' counts the group's requests in flight.
    if redis.call('HINCRBY', P .. K.group_busy, group, -1) <= 0 then
      redis.call('HDEL', P .. K.group_busy, group)
    end
  else
    redis.call('HDEL', P .. K.group_busy, group)
  end
  local known = redis.call('HGET', P .. K.group_next, group)
  if not known or tonumber(known) < at then
    redis.call('HSET', P .. K.group_next, group, fmt(at))
  end
  local waiting = redis.call('ZPOPMIN', P .. K.group_wait .. group)
  if #waiting > 0 then
    redis.call('ZADD', P .. K.ready, fmt(at), waiting[1])
  end
  return group, #waiting > 0
end

-- Requests in flight per politeness key at most (k): FRONTIER_CONCURRENCY_PER_KEY, or
-- a DOWNLOAD_SLOTS entry's concurrency, kept per key in P..K.slot_limit and read
-- once per script run when the crawl has any (`limited`). Returns the function
-- giving a key's k.
local function slot_limits(P, per_key, limited)
  if not limited then
    return function(_) return per_key end
  end
  local limits = {}
  local flat = redis.call('HGETALL', P .. K.slot_limit)
  for i = 1, #flat, 2 do
    limits[flat[i]] = tonumber(flat[i + 1])
  end
  return function(key) return limits[key] or per_key end
end

-- Several requests in flight per host (k > 1; with k = 1 none of this runs and
-- a host in flight is simply out of the ready heap). The k slots share the
-- host's politeness budget: each slot keeps its own clock, free again the
-- politeness delay of its own answer after that answer, so the host gets at
-- most k times the load one slot gives it, and up to k requests overlap when
-- the answers take longer than the starts' spacing. P..K.slots holds
-- "<in flight> <spacing ms> <last start ms> <hold ms> <free ms>..." of a host
-- with requests in flight or slots cooling: its starts are spaced by at least
-- <spacing> (the minimum delay / k before its first answer, then its
-- Crawl-delay floor if higher); <hold> is a backoff of the whole host (429,
-- 503, parking, Retry-After: an answer never brings the host's time earlier
-- than a sibling's backoff set it); each <free> is the time a slot that
-- answered is free again. A host is in the ready heap while fewer than k are
-- in flight, at the time its next start may come; at k it leaves the heap
-- until an ack. The field goes when the host has nothing in flight and leaves
-- the ready heap (asleep, dry), so it is bounded by the awake hosts. (A field
-- of three numbers, an older layout's, reads as no hold and no slot cooling.)
local function slots_parse(raw)
  if not raw then
    return 0, nil, nil, 0, {}
  end
  local values, i = {}, 0
  for digits in string.gmatch(raw, '%d+') do
    i = i + 1
    values[i] = tonumber(digits)
  end
  local frees = {}
  for j = 5, i do
    frees[#frees + 1] = values[j]
  end
  return values[1] or 0, values[2], values[3], values[4] or 0, frees
end

local function slots_get(P, host)
  return slots_parse(redis.call('HGET', P .. K.slots, host))
end

-- The slots still cooling at `now` (sorted), and the hold if it is still ahead.
local function slots_prune(now, hold, frees)
  local kept = {}
  for _, at in ipairs(frees) do
    if at > now then
      kept[#kept + 1] = at
    end
  end
  table.sort(kept)
  return (hold > now) and hold or 0, kept
end

-- When the host may start its next request (nil: k in flight, it waits for an ack).
local function slots_next(now, k, n, spacing, start, hold, frees)
  if n >= k then
    return nil
  end
  local at = now
  if n + #frees >= k then
    at = frees[#frees - (k - n) + 1]  -- every idle slot cools: the first to be free
  end
  if start and spacing and start + spacing > at then
    at = start + spacing
  end
  if hold > at then
    at = hold
  end
  return at
end

local function slots_set(P, host, n, spacing, start, hold, frees)
  local text = fmt(math.max(n, 0)) .. ' ' .. fmt(spacing or 0) .. ' ' .. fmt(start or 0) .. ' ' .. fmt(hold)
  for _, at in ipairs(frees) do
    text = text .. ' ' .. fmt(at)
  end
  redis.call('HSET', P .. K.slots, host, text)
end

local function slots_drop(P, host)
  redis.call('HDEL', P .. K.slots, host)
end

-- Give a lease's entry back (an expired or released lease): it leaves the
-- leased hash for the head of its level in its host's back queue (a
-- robots.txt lease has none: its request never left the queue), and the host
-- is ready at `at` (it kept its back queue while in flight; with k > 1 its
-- slot is free at once, and a host asleep stays asleep, its other requests'
-- acks decide).
local function requeue(P, leaseno, id, host, level, at, grouped, k_of)
  local entry = nil
  if id ~= ROBOTS_ID then
    entry = redis.call('HGET', P .. K.leased, leaseno)
    redis.call('HDEL', P .. K.leased, leaseno)
  end
  if entry then
    redis.call('RPUSH', back_key(P, host, level), entry)
    redis.call('INCR', P .. K.queued)
  end
  redis.call('SADD', P .. K.active, host)
  local group = grouped and group_of(P, host) or host
  local k = k_of(group)
  at = tonumber(at)
  if k > 1 then
    local n, spacing, start, hold, frees = slots_get(P, host)
    n = n - 1
    hold, frees = slots_prune(at, hold, frees)
    if redis.call('ZSCORE', P .. K.sleeping, host) then
      if n > 0 then
        slots_set(P, host, n, spacing, start, hold, frees)
      else
        slots_drop(P, host)
      end
      return
    end
    slots_set(P, host, n, spacing, start, hold, frees)
    redis.call('ZADD', P .. K.ready, fmt(slots_next(at, k, n, spacing, start, hold, frees)), host)
  else
    redis.call('ZADD', P .. K.ready, 'NX', at, host)
  end
  if grouped then
    free_group(P, host, at, k, group)
  end
end
