-- Shared helpers, defined once when the crawler's function library loads (crawler/schema.py
-- compose_library); every function of the library may use them.
-- Key layout (see crawler/frontier/keys.py): every key starts with the shard
-- prefix P, which carries the shard's hash tag.

-- A whole number as decimal digits (times in ms, counts, bucket numbers). Lua numbers are doubles:
-- tostring, `..` and '%.0f' format them as floats (glibc's slow path); '%d' as an integer. A
-- fraction is rounded.
local function fmt(n)
  if n % 1 == 0 then
    return string.format('%d', n)
  end
  return string.format('%d', math.floor(n + 0.5))
end

-- A number given as text (a script's argument), read once per call: Redis' Lua reads a number
-- from text with strtod, twice in a tonumber, and the calls of a `_many` function's run
-- (crawler/schema.py _LIBRARY_MANY) repeat the same settings. Every function of the library
-- starts with a new table (library locals outlive a call): at most one entry per argument.
local NUMBERS = {}
local function num(text)
  local n = NUMBERS[text]
  if not n then
    n = tonumber(text)
    NUMBERS[text] = n
  end
  return n
end

-- A small whole number's decimal digits (a level, a block): a table lookup below 256
-- (BYTE_DECIMAL, crawler/schema.py), where string.format is a C function call, about 2,000 of
-- Redis' instructions.
local function small_decimal(n)
  return BYTE_DECIMAL[n] or fmt(n)
end

-- A lease member is "<leaseno> <level> <id> <host>": id is the lease number
-- itself, or ROBOTS_ID for a robots.txt lease.
local function parse_member(member)
  local leaseno, level, id, host = string.match(member, '^(%d+) (%d+) (%d+) (%S+)$')
  if not leaseno then
    return nil
  end
  return leaseno, tonumber(level), id, host
end

-- The request id of a robots.txt lease: the host's robots.txt, fetched before
-- its pages (lease numbers start at 1). Its request stays queued meanwhile.
local ROBOTS_ID = '0'

-- A command sent once for many values: its head (command and fixed
-- arguments), then values pushed one, two or four at a time; it is sent when
-- it reaches CHUNK values (Lua 5.1 unpacks at most about 8000) and by `flush`.
local CHUNK = 4000

local function batch(...)
  local head = {...}
  return {head = head, args = {...}, n = #head, base = #head}
end

local function flush(b)
  if b.n > b.base then
    redis.call(unpack(b.args, 1, b.n))
    b.args = {unpack(b.head)}
    b.n = b.base
  end
end

local function push1(b, x)
  local n = b.n + 1
  b.args[n] = x
  b.n = n
  if n >= CHUNK then
    flush(b)
  end
end

local function push2(b, x, y)
  local args, n = b.args, b.n
  args[n + 1] = x
  args[n + 2] = y
  b.n = n + 2
  if b.n >= CHUNK then
    flush(b)
  end
end

local function push4(b, w, x, y, z)
  local args, n = b.args, b.n
  args[n + 1] = w
  args[n + 2] = x
  args[n + 3] = y
  args[n + 4] = z
  b.n = n + 4
  if b.n >= CHUNK then
    flush(b)
  end
end

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

-- (Level 0 with an RPOP, the others with one LMPOP, highest first: two commands at most, where
-- an RPOP per level costs one each.)
local function back_pop(P, host, levels)
  local base = back_base(P, host)
  local entry = redis.call('RPOP', base .. small_decimal(0))
  if entry then
    return entry, 0
  end
  if levels < 2 then
    return nil, nil
  end
  local args = {'LMPOP', levels - 1}
  for level = 1, levels - 1 do
    args[level + 2] = base .. small_decimal(level)
  end
  args[levels + 2] = 'RIGHT'
  local popped = redis.call(unpack(args))
  if popped then
    for level = 1, levels - 1 do
      if args[level + 2] == popped[1] then
        return popped[2][1], level
      end
    end
  end
  return nil, nil
end

local function back_peek(P, host, levels)
  local base = back_base(P, host)
  for level = 0, levels - 1 do
    local entry = redis.call('LINDEX', base .. small_decimal(level), -1)
    if entry then
      return entry, level
    end
  end
  return nil, nil
end

local function back_empty(P, host, levels)
  local base = back_base(P, host)
  local args = {'EXISTS'}
  for level = 0, levels - 1 do
    args[level + 2] = base .. small_decimal(level)
  end
  return redis.call(unpack(args)) == 0
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

-- Linear hashing (Litwin, 1980): a structure that grows one small key at a
-- time, so each key stays in Redis' compact encodings (an intset, a
-- listpack) whatever the crawl's size. Its state, P..K.lh..name, is
-- struct '>BI4I8' (L, s, n): 2^L + s buckets (bucket b is key base..b), n
-- entries. An entry's hash h (lh_hash) is taken from its 64-bit key; it lives
-- in bucket h mod 2^L, or h mod 2^(L+1) when that is below the split pointer
-- s. When n passes `load` entries per bucket, bucket s is split: its entries
-- with bit L of h set move to bucket s + 2^L. Python finds a bucket the same
-- way (crawler/frontier/compact.py).
local LH_MOD = 16777216
local LH_STATE = '>BI4I8'

-- The hash of a 64-bit URL key written in decimal: its absolute value's last 9
-- digits, mod 2^24 (URL keys are uniform, so these are too, within 2% at 2^24
-- buckets). One number conversion: Redis' Lua parses a number with strtod,
-- about as costly as a redis.call, and every split hashes a whole bucket.
local function lh_hash(decimal)
  local h = tonumber(string.sub(decimal, -9))
  if h < 0 then
    h = -h
  end
  return h % LH_MOD
end

-- The states a `_many` function's run (crawler/schema.py _LIBRARY_MANY) has open, by key: its calls
-- read a state once and write its count once, at the end of the run (lh_flush), unless they split a
-- bucket (the split's state is written at once). A count written late, or not at all if the run
-- fails, only delays a split. False in a single call (every function sets it as it starts).
local LH_RUN = false

local function lh_open(P, name, base, kind, load)
  local state = P .. K.lh .. name
  local lh = LH_RUN and LH_RUN[state]
  if lh then
    lh.load, lh.added = math.max(1, load), 0
    return lh
  end
  local raw = redis.call('GET', state)
  local L, s, n = 0, 0, 0
  if raw then
    L, s, n = struct.unpack(LH_STATE, raw)
  end
  lh = {state = state, base = base, kind = kind, load = math.max(1, load), L = L, s = s, n = n, added = 0,
        dirty = false}
  if LH_RUN then
    LH_RUN[state] = lh
  end
  return lh
end

local function lh_key(lh, h)
  local size = 2 ^ lh.L
  local b = h % size
  if b < lh.s then
    b = h % (2 * size)
  end
  return lh.base .. fmt(b)
end

-- Count the new entries (lh.added); split while over the load; save the state.
-- Called once at the end of a script or call (its lookups used the state it read).
local function lh_close(lh)
  if lh.added == 0 then
    return
  end
  lh.n = lh.n + lh.added
  lh.added = 0
  if LH_RUN and not (lh.n > lh.load * (2 ^ lh.L + lh.s) and lh.L < 24) then
    lh.dirty = true
    return
  end
  while lh.n > lh.load * (2 ^ lh.L + lh.s) and lh.L < 24 do
    local size = 2 ^ lh.L
    local from = lh.base .. fmt(lh.s)
    local to = lh.base .. fmt(lh.s + size)
    if lh.kind == 'hash' then
      local entries = redis.call('HGETALL', from)
      local moving, gone = batch('HSET', to), batch('HDEL', from)
      for i = 1, #entries, 2 do
        if lh_hash(entries[i]) % (2 * size) ~= lh.s then
          push2(moving, entries[i], entries[i + 1])
          push1(gone, entries[i])
        end
      end
      flush(moving)
      flush(gone)
    else
      local members = redis.call('SMEMBERS', from)
      local moving, gone = batch('SADD', to), batch('SREM', from)
      for _, member in ipairs(members) do
        if lh_hash(member) % (2 * size) ~= lh.s then
          push1(moving, member)
          push1(gone, member)
        end
      end
      flush(moving)
      flush(gone)
    end
    lh.s = lh.s + 1
    if lh.s == size then
      lh.L = lh.L + 1
      lh.s = 0
    end
  end
  lh.dirty = false
  redis.call('SET', lh.state, struct.pack(LH_STATE, lh.L, lh.s, lh.n))
end

-- The counts a many form's calls left unwritten (lh_close), at the end of its run.
local function lh_flush()
  for state, lh in pairs(LH_RUN) do
    if lh.dirty then
      lh.dirty = false
      redis.call('SET', state, struct.pack(LH_STATE, lh.L, lh.s, lh.n))
    end
  end
end

-- URL records (crawler/metadata/record.py): a binary head (URLREC_FORMAT),
-- the ETag, then the URL after its scheme, in the buckets P..K.urls (linear
-- hashing 'url'). A record's host is the first host_len bytes of its tail.
local function urls_open(P, load)
  return lh_open(P, 'url', P .. K.urls, 'hash', load)
end

local function record_unpack(packed)
  local r = {struct.unpack(URLREC_FORMAT, packed)}
  local pos = r[#r]
  r[#r] = nil
  local etag_len = r[URLREC.etag_len]
  r.etag = string.sub(packed, pos, pos + etag_len - 1)
  r.tail = string.sub(packed, pos + etag_len)
  return r
end

local function record_pack(r)
  r[URLREC.etag_len] = #r.etag
  return struct.pack(URLREC_FORMAT, unpack(r, 1, URLREC_COUNT)) .. r.etag .. r.tail
end

local function record_has(r, flag)
  return math.floor(r[URLREC.flags] / flag) % 2 == 1
end

-- A stored record keeps its host as a 3-byte number of the shard
-- (URLREC_FLAG.FLAG_HOST_ID; K.host_ids, K.host_names), not its name: the
-- scripts store records so (record_intern) and hand them out with the name
-- again (record_external); Python only sees names. Past 2^24 hosts in a
-- shard, records keep the name.
local HOST_ID = URLREC_FLAG.FLAG_HOST_ID

local function host_number(P, host)
  local id = redis.call('HGET', P .. K.host_ids, host)
  if id then
    return tonumber(id)
  end
  id = redis.call('INCR', P .. K.host_sequence)
  if id >= 16777216 then
    return nil
  end
  redis.call('HSET', P .. K.host_ids, host, id)
  redis.call('HSET', P .. K.host_names, id, host)
  return id
end

local function record_intern(P, r)
  local n = r[URLREC.host_len]
  if n == 0 or record_has(r, HOST_ID) then
    return
  end
  local id = host_number(P, string.sub(r.tail, 1, n))
  if id then
    r.tail = string.char(math.floor(id / 65536), math.floor(id / 256) % 256, id % 256) .. string.sub(r.tail, n + 1)
    r[URLREC.host_len] = 3
    r[URLREC.flags] = r[URLREC.flags] + HOST_ID
  end
end

local function record_host(P, r)
  local head = string.sub(r.tail, 1, r[URLREC.host_len])
  if record_has(r, HOST_ID) then
    local a, b, c = string.byte(head, 1, 3)
    return redis.call('HGET', P .. K.host_names, a * 65536 + b * 256 + c) or ''
  end
  return head
end

local function record_external(P, packed)
  local r = record_unpack(packed)
  if not record_has(r, HOST_ID) then
    return packed
  end
  local host = record_host(P, r)
  r.tail = host .. string.sub(r.tail, 4)
  r[URLREC.host_len] = #host
  r[URLREC.flags] = r[URLREC.flags] - HOST_ID
  return record_pack(r)
end

-- A record for a URL key the store has none of: every field at its default.
local function record_empty()
  local r = {}
  for i = 1, URLREC_COUNT do
    r[i] = 0
  end
  r[URLREC.version] = URLREC_VERSION
  r[URLREC.digest] = '\0\0\0\0'
  r[URLREC.simhash] = '\0\0\0\0\0\0\0\0'
  r.etag = ''
  r.tail = ''
  return r
end

-- The recrawl schedule: URL keys by due time (crawl-clock seconds) in small
-- sorted sets (P..K.due_bucket..n), each holding a range of times; the index
-- P..K.due maps each bucket to the lowest time it may hold. Every entry of a
-- bucket is at or above its bound and below the next bucket's; a bucket over
-- `max` entries is split in two at a time boundary; an empty one is removed.
-- The earliest due URLs are at the start of the first bucket.
local function due_find(P, t, ts)
  local found = redis.call('ZREVRANGEBYSCORE', P .. K.due, ts or fmt(t), '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #found > 0 then
    return found[1], tonumber(found[2])
  end
  found = redis.call('ZRANGE', P .. K.due, 0, 0, 'WITHSCORES')
  return found[1], tonumber(found[2])
end

local function due_take(P, b, key)
  local bucket = P .. K.due_bucket .. b
  if redis.call('ZREM', bucket, key) == 0 then
    return false
  end
  redis.call('DECR', P .. K.due_count)
  if redis.call('EXISTS', bucket) == 0 then
    redis.call('ZREM', P .. K.due, b)
  end
  return true
end

-- An entry of time t is in the bucket due_find gives, or (after a split
-- among equal times, which leaves the upper half in a bucket of the same
-- bound) in one whose bound is t: the buckets from the highest bound <= t
-- down to the first bound below t.
local function due_remove(P, key, t)
  local offset = 0
  local found
  local ts = fmt(t)
  repeat
    found = redis.call('ZREVRANGEBYSCORE', P .. K.due, ts, '-inf', 'WITHSCORES', 'LIMIT', offset, 8)
    for i = 1, #found, 2 do
      if due_take(P, found[i], key) then
        return true
      end
      if tonumber(found[i + 1]) < t then
        return false
      end
    end
    offset = offset + 8
  until #found < 16
  if offset == 8 and #found == 0 then
    local first = redis.call('ZRANGE', P .. K.due, 0, 0)
    return first[1] ~= nil and due_take(P, first[1], key)
  end
  return false
end

-- A bucket that passes max entries is split in two by rank (its upper half
-- moves to a new bucket whose bound is the half's first time), so a bucket
-- never holds more than max + 1 entries, equal times included.
local function due_insert(P, key, t, max, ts)
  ts = ts or fmt(t)
  local b, bound = due_find(P, t, ts)
  if not b then
    b = fmt(redis.call('INCR', P .. K.due_sequence))
    redis.call('ZADD', P .. K.due, ts, b)
  elseif bound > t then
    redis.call('ZADD', P .. K.due, ts, b)  -- below every bucket: the first one reaches down to t
  end
  local bucket = P .. K.due_bucket .. b
  if redis.call('ZADD', bucket, ts, key) == 1 then
    redis.call('INCR', P .. K.due_count)
  end
  local n = redis.call('ZCARD', bucket)
  if n <= max then
    return
  end
  local half = math.floor(n / 2)
  local moving = redis.call('ZRANGE', bucket, half, -1, 'WITHSCORES')
  local fresh = fmt(redis.call('INCR', P .. K.due_sequence))
  local add = batch('ZADD', P .. K.due_bucket .. fresh)
  for i = 1, #moving, 2 do
    push2(add, moving[i + 1], moving[i])
  end
  flush(add)
  redis.call('ZREMRANGEBYRANK', bucket, half, -1)
  redis.call('ZADD', P .. K.due, moving[2], fresh)
end

-- A URL moved in the recrawl schedule to time t: out of where its record `r` says it is (next_visit),
-- in at t, and r's next_visit set (its caller writes r).
local function due_move(P, key, r, t, max, ts)
  if r[URLREC.next_visit] > 0 then
    due_remove(P, key, r[URLREC.next_visit])
  end
  due_insert(P, key, t, max, ts)
  r[URLREC.next_visit] = t
end

-- The decimal form of a signed 64-bit big-endian integer given as 8 bytes
-- (a URL key as the duplicate index stores it), exactly: 16-bit limbs.
local function int64_decimal(b)
  local limbs = {}
  for i = 0, 3 do
    limbs[i + 1] = string.byte(b, 2 * i + 1) * 256 + string.byte(b, 2 * i + 2)
  end
  local negative = limbs[1] >= 32768
  if negative then
    local carry = 1
    for i = 4, 1, -1 do
      local v = 65535 - limbs[i] + carry
      limbs[i] = v % 65536
      carry = math.floor(v / 65536)
    end
  end
  local groups = {}
  repeat
    local rem, zero = 0, true
    for i = 1, 4 do
      local cur = rem * 65536 + limbs[i]
      limbs[i] = math.floor(cur / 10000)
      rem = cur % 10000
      if limbs[i] ~= 0 then
        zero = false
      end
    end
    table.insert(groups, 1, rem)
  until zero
  local out = tostring(groups[1])
  for i = 2, #groups do
    out = out .. string.format('%04d', groups[i])
  end
  if negative then
    out = '-' .. out
  end
  return out
end
