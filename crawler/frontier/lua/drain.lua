-- Move due revisits into the frontier, oldest due first (whichever worker
-- has free slots calls this; no scan of all URLs: a range of the due set).
-- KEYS[1]: the shard's due set
-- ARGV[1]: P; ARGV[2]: now (crawl-clock ms); ARGV[3]: at most this many
-- A revisit skips the seen set (its URL is known) and the page budgets (it
-- is not a new URL); it joins its host's back queue if the host has one,
-- else the front queue of its level, like any enqueued request.
-- Returns {moved, still due now, earliest due time (-1: none), size of the due set}.
local P = ARGV[1]
local now = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local due = KEYS[1]
local requests = P .. K.due_requests
local members = redis.call('ZRANGEBYSCORE', due, '-inf', now, 'LIMIT', 0, limit)
local moved = 0
for _, member in ipairs(members) do
  local value = redis.call('HGET', requests, member)
  redis.call('ZREM', due, member)
  redis.call('HDEL', requests, member)
  if value then
    local level, host, blob = string.match(value, '^(%d+) (%S+) (.*)$')
    if level then
      level = tonumber(level)
      local id = redis.call('INCR', P .. K.sequence)
      redis.call('HSET', P .. K.requests, id, blob)
      if redis.call('SISMEMBER', P .. K.active, host) == 1 then
        redis.call('ZADD', P .. K.queue .. host, fmt(level * SCALE + id), id)
      else
        redis.call('LPUSH', P .. K.front .. level, host .. ' ' .. id)
      end
      moved = moved + 1
    end
  end
end
if moved > 0 then
  redis.call('INCRBY', P .. K.queued, moved)
end
local remaining = redis.call('ZCOUNT', due, '-inf', now)
local first = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
local earliest = -1
if first[2] then
  earliest = tonumber(first[2])
end
return {moved, remaining, fmt(earliest), redis.call('ZCARD', due)}
