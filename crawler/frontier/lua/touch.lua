-- Make revisits due now when a sitemap says their page changed.
-- KEYS[1]: the shard's due set
-- ARGV[1]: P; ARGV[2]: now (crawl-clock ms); then 3 values per URL: member
--   (hex metadata field), host, sitemap lastmod (crawl-clock seconds)
-- A URL is made due only if it waits in the due set (fetched before and
-- scheduled) and its last fetch is older than the lastmod; never later.
-- Returns the number of URLs made due.
local P = ARGV[1]
local now = ARGV[2]
local due = KEYS[1]
local touched = 0
for i = 3, #ARGV, 3 do
  local member, host, lastmod = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local score = redis.call('ZSCORE', due, member)
  if score and tonumber(score) > tonumber(now) then
    local field = ''
    for j = 1, #member, 2 do
      field = field .. string.char(tonumber(string.sub(member, j, j + 1), 16))
    end
    local packed = redis.call('HGET', P .. K.urlmeta .. host, field)
    local fetched = 0
    if packed then
      fetched = cmsgpack.unpack(packed)[URLMETA.fetched_at] or 0
    end
    if fetched < lastmod then
      redis.call('ZADD', due, now, member)
      touched = touched + 1
    end
  end
end
return touched
