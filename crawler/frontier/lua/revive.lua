-- Move dead letters back into the queues (an operator's requeue).
-- KEYS[1]: the shard's dead-letter hash
-- ARGV[1]: P; then 2 values per request: id, encoded request ('' = as stored)
-- The request keeps its id and level, and is routed like a new one (its
-- host's back queue, or the front queue of its level). Ids that are not dead
-- letters are skipped. Returns the number revived.
local P = ARGV[1]
local dead = KEYS[1]
local revived = 0
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local info = redis.call('HGET', P .. K.dead_info, id)
  local stored = redis.call('HGET', dead, id)
  if info and stored then
    local host, level = string.match(info, '^(%S+)\t(%d+)\t')
    local blob = ARGV[i + 1]
    if blob == '' then
      blob = stored
    end
    redis.call('HSET', P .. K.requests, id, blob)
    if redis.call('SISMEMBER', P .. K.active, host) == 1 then
      redis.call('ZADD', P .. K.queue .. host, fmt(tonumber(level) * SCALE + tonumber(id)), id)
    else
      redis.call('LPUSH', P .. K.front .. level, host .. ' ' .. id)
    end
    redis.call('HDEL', dead, id)
    redis.call('HDEL', P .. K.dead_info, id)
    redis.call('INCR', P .. K.queued)
    revived = revived + 1
  end
end
return revived
