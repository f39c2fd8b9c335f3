#!lua
-- Make revisits due now when a sitemap says their page changed.
-- KEYS[1]: the shard's due index
-- ARGV[1]: P; ARGV[2]: now (crawl-clock ms); ARGV[3]: entries per due bucket
--   at most; ARGV[4]: URL records per bucket (linear hashing); then 2 values
--   per URL: URL key, sitemap lastmod (crawl-clock seconds)
-- A URL is made due only if it waits in the recrawl schedule (fetched before
-- and scheduled, its record's next_visit) later than now, and its last fetch
-- is older than the lastmod; never later.
-- Returns the number of URLs made due.
local P = ARGV[1]
local now = math.floor(tonumber(ARGV[2]) / 1000)
local max = tonumber(ARGV[3])
local records = urls_open(P, tonumber(ARGV[4]))
local touched = 0
for i = 5, #ARGV, 2 do
  local key, lastmod = ARGV[i], tonumber(ARGV[i + 1])
  local bucket = lh_key(records, lh_hash(key))
  local packed = redis.call('HGET', bucket, key)
  if packed then
    local record = record_unpack(packed)
    local due = record[URLREC.next_visit]
    if due > now and record[URLREC.fetched_at] < lastmod and due_remove(P, key, due) then
      due_insert(P, key, now, max)
      record[URLREC.next_visit] = now
      redis.call('HSET', bucket, key, record_pack(record))
      touched = touched + 1
    end
  end
end
return touched
