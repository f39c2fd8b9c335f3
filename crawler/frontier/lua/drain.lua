#!lua
-- Move due revisits into the frontier, oldest due first (whichever worker
-- has free slots calls this; no scan of all URLs: the buckets of the recrawl
-- schedule whose bound has passed, see crawlstate/lua/due.lua).
-- KEYS[1]: the shard's due index
-- ARGV[1]: P; ARGV[2]: now (crawl-clock ms); ARGV[3]: at most this many;
-- ARGV[4]: URL records per bucket (linear hashing)
-- A revisit skips the seen set (its URL is known) and the page budgets (it
-- is not a new URL); it enters as "@<URL key>", a reference to its record,
-- at the level its record gives: its host's back queue if the host has one,
-- else the front queue of its level, like any enqueued request. A URL whose
-- record is gone or dead is dropped.
-- Returns {moved, still due now, earliest due time (ms, -1: none), URLs in the schedule}.
local P = ARGV[1]
local now = math.floor(tonumber(ARGV[2]) / 1000)
local limit = tonumber(ARGV[3])
local records = urls_open(P, tonumber(ARGV[4]))
local index = KEYS[1]
local moved = 0

-- Every bucket whose bound is <= now may hold due entries (buckets of equal
-- bounds are not ordered among themselves: see due_insert in crawlstate/lua/due.lua);
-- none above. A bucket drained empty leaves the index. A bucket's entries are
-- scored latest first (due_score): its due ones are its last, the earliest last.
local function take(b, bound)
  local bucket = P .. K.due_bucket .. b
  local keys = redis.call('ZREVRANGEBYSCORE', bucket, '+inf', due_until(bound, now), 'LIMIT', 0, limit - moved)
  if #keys > 0 then
    for _, key in ipairs(keys) do
      local packed = redis.call('HGET', lh_key(records, lh_hash(key)), key)
      if packed then
        local record = record_unpack(packed)
        if record[URLREC.state] ~= URL_STATE.DEAD then
          local host, level = record_host(P, record), record[URLREC.level]
          if redis.call('SISMEMBER', P .. K.active, host) == 1 then
            redis.call('LPUSH', back_key(P, host, level), '@' .. key)
          else
            redis.call('LPUSH', P .. K.front .. level, host .. ' @' .. key)
          end
          moved = moved + 1
        end
      end
    end
    local gone = batch('ZREM', bucket)
    for _, key in ipairs(keys) do
      push1(gone, key)
    end
    flush(gone)
    redis.call('DECRBY', P .. K.due_count, #keys)
  end
  if redis.call('EXISTS', bucket) == 0 then
    redis.call('ZREM', index, b)
    return false
  end
  return true
end

local offset = 0
while moved < limit do
  local buckets = redis.call('ZRANGEBYSCORE', index, '-inf', now, 'WITHSCORES', 'LIMIT', offset, 16)
  if #buckets == 0 then
    break
  end
  for i = 1, #buckets, 2 do
    if moved >= limit then
      break
    end
    if take(buckets[i], buckets[i + 1] + 0) then
      offset = offset + 1
    end
  end
end
if moved > 0 then
  redis.call('INCRBY', P .. K.queued, moved)
end

-- What is still due now (in the first buckets), and the earliest due time.
local earliest, remaining = -1, 0
local function head(b, bound)
  local bucket = P .. K.due_bucket .. b
  local first = redis.call('ZRANGE', bucket, -1, -1, 'WITHSCORES')
  if first[2] then
    local t = due_entry_time(bound, first[2] + 0)
    if earliest < 0 or t < earliest then
      earliest = t
    end
  end
  return bucket
end
local due_now = redis.call('ZRANGEBYSCORE', index, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 16)
for i = 1, #due_now, 2 do
  local bound = due_now[i + 1] + 0
  remaining = remaining + redis.call('ZCOUNT', head(due_now[i], bound), due_until(bound, now), '+inf')
end
local above = redis.call('ZRANGEBYSCORE', index, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
if above[1] then
  head(above[1], above[2] + 0)
end
if earliest >= 0 then
  earliest = earliest * 1000
end
return {moved, remaining, fmt(earliest), tonumber(redis.call('GET', P .. K.due_count) or '0')}
