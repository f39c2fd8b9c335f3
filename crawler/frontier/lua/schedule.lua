-- Schedule revisits: each URL into the due set at its next visit time.
-- KEYS[1]: the shard's due set (ZSET member -> due time, crawl-clock ms)
-- ARGV[1]: P; then 6 values per URL: member (the URL's metadata field, hex),
--   due_ms, level, host, encoded request, URL metadata field (8 bytes; '' =
--   none: then the record's next_visit is not updated)
-- A URL has at most one entry: scheduling it again moves it. The request
-- waits in P..'due:req' as "<level> <host> <blob>" until drain.lua moves it.
-- Returns the number of URLs scheduled.
local P = ARGV[1]
local due = KEYS[1]
local requests = P .. K.due_requests
local scheduled = 0
for i = 2, #ARGV, 6 do
  local member, at, level, host, blob, field = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  redis.call('ZADD', due, at, member)
  redis.call('HSET', requests, member, level .. ' ' .. host .. ' ' .. blob)
  if field ~= '' then
    local metadata = P .. K.urlmeta .. host
    local packed = redis.call('HGET', metadata, field)
    if packed then
      local record = cmsgpack.unpack(packed)
      record[URLMETA.next_visit] = math.floor(tonumber(at) / 1000)  -- seconds
      redis.call('HSET', metadata, field, cmsgpack.pack(record))
    end
  end
  scheduled = scheduled + 1
end
return scheduled
