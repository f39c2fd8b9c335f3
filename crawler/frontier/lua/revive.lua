#!lua
-- Move dead letters back into the queues (an operator's requeue).
-- KEYS[1]: the shard's dead-letter hash
-- ARGV[1]: P; then 2 values per request: dead letter number, request ('' =
-- as stored)
-- The request keeps its level and is routed like a new one (its host's back
-- queue, or the front queue of its level). Numbers that are not dead letters
-- are skipped. Returns the number revived.
local P = ARGV[1]
local dead = KEYS[1]
local revived = 0
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local info = redis.call('HGET', P .. K.dead_info, id)
  local stored = redis.call('HGET', dead, id)
  if info and stored then
    local host, level = string.match(info, '^(%S+)\t(%d+)\t')
    local entry = ARGV[i + 1]
    if entry == '' then
      entry = stored
    end
    if redis.call('SISMEMBER', P .. K.active, host) == 1 then
      redis.call('LPUSH', back_key(P, host, level), entry)
    else
      redis.call('LPUSH', P .. K.front .. level, host .. ' ' .. entry)
    end
    redis.call('HDEL', dead, id)
    redis.call('HDEL', P .. K.dead_info, id)
    redis.call('INCR', P .. K.queued)
    revived = revived + 1
  end
end
return revived
