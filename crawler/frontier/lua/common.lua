-- Shared helpers, prepended to every frontier script.
-- Key layout (see crawler/frontier/keys.py): every key starts with the shard
-- prefix P, which carries the shard's hash tag.
-- A back-queue score is level * SCALE + id: lower level first, FIFO inside a level.
local SCALE = 10000000000000

local function fmt(n)
  return string.format('%.0f', n)
end

-- A lease member is "<leaseno> <level> <id> <host>".
local function parse_member(member)
  local leaseno, level, id, host = string.match(member, '^(%d+) (%d+) (%d+) (%S+)$')
  if not leaseno then
    return nil
  end
  return leaseno, tonumber(level), id, host
end

-- The request id of a robots.txt lease: the host's robots.txt, fetched before
-- its pages (request ids start at 1). Its request stays queued meanwhile.
local ROBOTS_ID = '0'

-- Politeness groups (FRONTIER_POLITENESS_KEY "domain" or "ip"): the hosts of
-- a group share one clock (P..'gnext': group -> next allowed ms) and one
-- request in flight (P..'gbusy': group -> the host in flight). A ready host
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
local function free_group(P, host, at)
  local group = group_of(P, host)
  redis.call('HDEL', P .. K.group_busy, group)
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

-- Put a leased request back at the head of its level in its host's back queue
-- and make the host ready at `at` (the host kept its back queue while in flight).
local function requeue(P, host, level, id, at, grouped)
  if id ~= ROBOTS_ID then
    redis.call('ZADD', P .. K.queue .. host, fmt(level * SCALE + tonumber(id)), id)
    redis.call('INCR', P .. K.queued)
  end
  redis.call('SADD', P .. K.active, host)
  redis.call('ZADD', P .. K.ready, 'NX', at, host)
  if grouped then
    free_group(P, host, tonumber(at))
  end
end

-- The in-link sketch (P .. K.inlinks): a counting Bloom filter of saturating
-- 8-bit cells, one BITFIELD string. A URL's cells are its first four Bloom
-- positions (little-endian uint32) modulo the number of cells; its estimate
-- is the smallest of them (never below the true count, above it only where
-- every cell collides). The enqueue script gets these cells ready-made from
-- the worker (RedisFrontier._build computes the same '#<cell>' offsets).
local function inlink_cells(positions, cells)
  local count = math.min(4, math.floor(#positions / 4))
  local out = {}
  for j = 1, count do
    out[j] = struct.unpack('<I4', positions, (j - 1) * 4 + 1) % cells
  end
  return out
end

local function inlink_estimate(key, positions, cells)
  local args = {'BITFIELD_RO', key}
  for _, cell in ipairs(inlink_cells(positions, cells)) do
    args[#args + 1] = 'GET'
    args[#args + 1] = 'u8'
    args[#args + 1] = '#' .. cell
  end
  if #args == 2 then
    return 0
  end
  local values = redis.call(unpack(args))
  local low = values[1]
  for j = 2, #values do
    low = math.min(low, values[j])
  end
  return low
end

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
