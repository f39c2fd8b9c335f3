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

-- Put a leased request back at the head of its level in its host's back queue
-- and make the host ready at `at` (the host kept its back queue while in flight).
local function requeue(P, host, level, id, at)
  redis.call('ZADD', P .. 'q:' .. host, fmt(level * SCALE + tonumber(id)), id)
  redis.call('SADD', P .. 'active', host)
  redis.call('ZADD', P .. 'ready', 'NX', at, host)
  redis.call('INCR', P .. 'queued')
end
