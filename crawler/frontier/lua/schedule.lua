#!lua
-- Schedule revisits: each URL into the recrawl schedule at its next visit time.
-- KEYS[1]: the shard's due index (anchors the script to the shard's slot)
-- ARGV[1]: P; ARGV[2]: entries per due bucket at most; ARGV[3]: URL records
--   per bucket (linear hashing); then 4 values per URL: URL key, due time
--   (crawl-clock s), front-queue level, capture time of its payload (epoch s)
-- A URL has at most one entry: scheduling it again moves it (its record's
-- next_visit says where the last one is). The revisit's request is built from
-- the URL's record when it is due (drain.lua, claim.lua): the record gets the
-- level and the capture time; a URL without a record is not scheduled.
-- Returns the number of URLs scheduled.
local P = ARGV[1]
local max = num(ARGV[2])
local records = urls_open(P, num(ARGV[3]))
local scheduled = 0
for i = 4, #ARGV, 4 do
  local key, at, level, captured = ARGV[i], tonumber(ARGV[i + 1]), num(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local bucket = lh_key(records, lh_hash(key))
  local packed = redis.call('HGET', bucket, key)
  if packed then
    local record = record_unpack(packed)
    due_move(P, key, record, at, max, ARGV[i + 1])
    record[URLREC.level] = level
    record[URLREC.captured] = captured
    redis.call('HSET', bucket, key, record_pack(record))
    scheduled = scheduled + 1
  end
end
return scheduled
