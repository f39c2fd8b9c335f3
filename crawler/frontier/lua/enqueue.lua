-- Seen-check, budget-check and enqueue a batch of requests, atomically per request.
-- KEYS[1]: the shard's Bloom filter bitmap (anchors the script to the shard's slot)
-- ARGV[1]: shard prefix P; ARGV[2]: number of Bloom hashes k;
-- ARGV[3]: host page budget (0: none); ARGV[4]: domain page budget (0: none)
-- ARGV[5]: c, the in-link sketch cells per URL (0: no in-link counting)
-- then 7 + k + c values per request: 64-bit fingerprint (decimal),
--   exact-store set index, host, registered domain, level, flags, encoded
--   request, the k Bloom bit offsets (decimal), the c sketch cells ('#<n>',
--   see common.lua).
--   flags bit 1: dont_filter (enqueue even if seen);
--   flags bit 2: exact only (skip the Bloom filter: its answer is never needed
--   for correctness, only for speed)
-- Redis CPU is the frontier's shared resource, so: numbers arrive as the
-- strings Redis takes (no number formatting here), a URL's Bloom bits and its
-- sketch cells are one BITFIELD each, and budget counters, the active-host
-- test and the id sequence are read once per call and written once per host
-- or once per call.
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
local c = tonumber(ARGV[5])
local stride = 7 + k + c
local bloom = KEYS[1]
local active = P .. 'active'
local reqs = P .. 'req'
local host_pages = P .. 'budget:host'
local domain_pages = P .. 'budget:domain'
local seq = P .. 'seq'
-- Argument lists reused for every request: `head`, then n times
-- (op, type, <offset>, 1); only the offsets change (set_bits[1 + 4j],
-- count_inlink[3 + 4j]).
local function repeated(head, op, kind, n)
  for _ = 1, n do
    head[#head + 1] = op
    head[#head + 1] = kind
    head[#head + 1] = ''
    head[#head + 1] = '1'
  end
  return head
end
local set_bits = repeated({'BITFIELD', bloom}, 'SET', 'u1', k)
local count_inlink = repeated({'BITFIELD', P .. 'inlinks', 'OVERFLOW', 'SAT'}, 'INCRBY', 'u8', c)
-- Per call: pages counted per host / domain (read once), pages added per
-- host / domain (written at the end), hosts known to own a back queue.
local host_count, host_added, domain_count, domain_added, is_active = {}, {}, {}, {}, {}
-- Pages counted for `name` in the hash `key`, read once per call.
local function counted(cache, key, name)
  local count = cache[name]
  if count == nil then
    count = tonumber(redis.call('HGET', key, name) or '0')
    cache[name] = count
  end
  return count
end
local base_id = tonumber(redis.call('GET', seq) or '0')
local added, duplicates, over_host, over_domain, false_positives = 0, 0, 0, 0, 0
for i = 6, #ARGV, stride do
  local fp, set, host, domain = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local level, flags = tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
  local offsets = i + 6  -- ARGV[offsets + j] for j = 1 .. k
  if c > 0 then
    local cells = offsets + k
    for j = 1, c do
      count_inlink[3 + 4 * j] = ARGV[cells + j]
    end
    redis.call(unpack(count_inlink))
  end
  local exact = P .. 'seen:x:' .. set
  local dont_filter = flags % 2 == 1
  local exact_only = math.floor(flags / 2) % 2 == 1
  local status = 'new'
  if not dont_filter then
    local maybe = true
    if not exact_only then
      for j = 1, k do
        if redis.call('GETBIT', bloom, ARGV[offsets + j]) == 0 then
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
    if status == 'new' and host_budget > 0 and counted(host_count, host_pages, host) >= host_budget then
      status = 'host'
    elseif status == 'new' and domain_budget > 0
        and counted(domain_count, domain_pages, domain) >= domain_budget then
      status = 'domain'
    end
  end
  if status == 'new' then
    for j = 1, k do
      set_bits[1 + 4 * j] = ARGV[offsets + j]
    end
    redis.call(unpack(set_bits))
    redis.call('SADD', exact, fp)
    if not dont_filter then
      host_count[host] = (host_count[host] or 0) + 1
      host_added[host] = (host_added[host] or 0) + 1
      domain_count[domain] = (domain_count[domain] or 0) + 1
      domain_added[domain] = (domain_added[domain] or 0) + 1
    end
    added = added + 1
    local id = fmt(base_id + added)
    local owned = is_active[host]
    if owned == nil then
      owned = redis.call('SISMEMBER', active, host) == 1
      is_active[host] = owned
    end
    if owned then
      redis.call('HSET', reqs, id, ARGV[i + 6])
      redis.call('ZADD', P .. 'q:' .. host, fmt(level * SCALE + base_id + added), id)
    else
      -- The request travels inside its front-queue entry (a list entry costs
      -- a few bytes; a hash field about 60): it enters the request hash when
      -- the refill gives its host a back queue.
      redis.call('LPUSH', P .. 'front:' .. level, host .. ' ' .. id .. ' ' .. ARGV[i + 6])
    end
  elseif status == 'dup' then
    duplicates = duplicates + 1
  elseif status == 'host' then
    over_host = over_host + 1
  else
    over_domain = over_domain + 1
  end
end
for host, n in pairs(host_added) do
  redis.call('HINCRBY', host_pages, host, n)
end
for domain, n in pairs(domain_added) do
  redis.call('HINCRBY', domain_pages, domain, n)
end
if added > 0 then
  redis.call('INCRBY', seq, added)
  redis.call('INCRBY', P .. 'queued', added)
  redis.call('INCRBY', P .. 'seencount', added)
end
return {added, duplicates, over_host, over_domain, false_positives}
