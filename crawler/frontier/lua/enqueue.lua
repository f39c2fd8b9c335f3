-- Seen-check, budget-check and enqueue a batch of requests, atomically per request.
-- KEYS[1]: the shard's Bloom filter bitmap (anchors the script to the shard's slot)
-- ARGV[1]: shard prefix P; ARGV[2]: number of Bloom hashes k;
-- ARGV[3]: host page budget (0: none); ARGV[4]: domain page budget (0: none)
-- ARGV[5]: cells of the in-link sketch (0: no in-link counting)
-- then 8 values per request: 64-bit fingerprint (decimal), Bloom positions
--   (k little-endian uint32), exact-store set index, host, registered domain,
--   level, flags, encoded request.
--   flags bit 1: dont_filter (enqueue even if seen);
--   flags bit 2: exact only (skip the Bloom filter: its answer is never needed
--   for correctness, only for speed)
-- Seen check: a Bloom bit at 0 means new; else the exact store decides (a
-- Bloom false positive is counted and the URL still enqueued). A new URL over
-- its host's or domain's budget is dropped and not recorded as seen.
-- A request whose host owns a back queue goes straight into it (the request
-- in the request hash, its id in the back queue); otherwise it waits, whole,
-- in the front queue of its level ("<host> <id> <request>") until the refill
-- activates its host.
-- Every request counts as an in-link of its URL in the sketch (P..'inlinks',
-- see common.lua), new or not: how often the crawl has found the URL.
-- Returns {added, duplicates, over host budget, over domain budget, bloom false positives}.
local P = ARGV[1]
local k = tonumber(ARGV[2])
local host_budget = tonumber(ARGV[3])
local domain_budget = tonumber(ARGV[4])
local inlink_cells_count = tonumber(ARGV[5])
local inlinks = P .. 'inlinks'
local bloom = KEYS[1]
local active = P .. 'active'
local reqs = P .. 'req'
local host_pages = P .. 'budget:host'
local domain_pages = P .. 'budget:domain'
local format = '<' .. string.rep('I4', k)
local added, duplicates, over_host, over_domain, false_positives = 0, 0, 0, 0, 0
for i = 6, #ARGV, 8 do
  local fp, positions, set, host, domain = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local level, flags = tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6])
  if inlink_cells_count > 0 then
    inlink_add(inlinks, positions, inlink_cells_count)
  end
  local exact = P .. 'seen:x:' .. set
  local dont_filter = flags % 2 == 1
  local exact_only = math.floor(flags / 2) % 2 == 1
  local status = 'new'
  if not dont_filter then
    local maybe = true
    if not exact_only then
      local bits = {struct.unpack(format, positions)}
      for j = 1, k do
        if redis.call('GETBIT', bloom, bits[j]) == 0 then
          maybe = false
          break
        end
      end
    end
    if maybe then
      if redis.call('SISMEMBER', exact, fp) == 1 then
        status = 'dup'
      elseif not exact_only then
        false_positives = false_positives + 1
      end
    end
    if status == 'new' and host_budget > 0
        and tonumber(redis.call('HGET', host_pages, host) or '0') >= host_budget then
      status = 'host'
    elseif status == 'new' and domain_budget > 0
        and tonumber(redis.call('HGET', domain_pages, domain) or '0') >= domain_budget then
      status = 'domain'
    end
  end
  if status == 'new' then
    local bits = {struct.unpack(format, positions)}
    for j = 1, k do
      redis.call('SETBIT', bloom, bits[j], 1)
    end
    redis.call('SADD', exact, fp)
    if not dont_filter then
      redis.call('HINCRBY', host_pages, host, 1)
      redis.call('HINCRBY', domain_pages, domain, 1)
    end
    local id = redis.call('INCR', P .. 'seq')
    if redis.call('SISMEMBER', active, host) == 1 then
      redis.call('HSET', reqs, id, ARGV[i + 7])
      redis.call('ZADD', P .. 'q:' .. host, fmt(level * SCALE + id), id)
    else
      -- The request travels inside its front-queue entry (a list entry costs
      -- a few bytes; a hash field about 60): it enters the request hash when
      -- the refill gives its host a back queue.
      redis.call('LPUSH', P .. 'front:' .. level, host .. ' ' .. id .. ' ' .. ARGV[i + 7])
    end
    added = added + 1
  elseif status == 'dup' then
    duplicates = duplicates + 1
  elseif status == 'host' then
    over_host = over_host + 1
  else
    over_domain = over_domain + 1
  end
end
if added > 0 then
  redis.call('INCRBY', P .. 'queued', added)
  redis.call('INCRBY', P .. 'seencount', added)
end
return {added, duplicates, over_host, over_domain, false_positives}
