-- Seen-check and enqueue a batch of requests, atomically per request.
-- KEYS[1]: the shard's seen set (anchors the script to the shard's slot)
-- ARGV[1]: shard prefix P
-- then 5 values per request: fingerprint, host, level, flags, encoded request
--   flags bit 1: dont_filter (enqueue even if the fingerprint was seen)
-- A request whose host owns a back queue goes straight into it; otherwise it
-- waits in the front queue of its level until the refill activates its host.
-- Returns {added, duplicates}.
local P = ARGV[1]
local seen = KEYS[1]
local active = P .. 'active'
local reqs = P .. 'req'
local added, duplicates = 0, 0
for i = 2, #ARGV, 5 do
  local fp, host, level, flags = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local is_new = redis.call('SADD', seen, fp)
  if is_new == 1 or flags % 2 == 1 then
    local id = redis.call('INCR', P .. 'seq')
    redis.call('HSET', reqs, id, ARGV[i + 4])
    if redis.call('SISMEMBER', active, host) == 1 then
      redis.call('ZADD', P .. 'q:' .. host, fmt(level * SCALE + id), id)
    else
      redis.call('LPUSH', P .. 'front:' .. level, host .. ' ' .. id)
    end
    added = added + 1
  else
    duplicates = duplicates + 1
  end
end
if added > 0 then
  redis.call('INCRBY', P .. 'queued', added)
end
return {added, duplicates}
