#!lua
-- Seen-check, budget-check, admit and enqueue a batch of requests, atomically per request.
-- KEYS[1]: the shard's Bloom filter bitmap (anchors the script to the shard's slot)
-- ARGV: the message ENQUEUE of crawler/crawlstate/protocol.py, read by name (ENQUEUE.<field>):
--   the shard prefix P; the number of Bloom hashes k (hashes); the host and
--   domain page budgets (0: none); politeness groups (grouping, see
--   frontier/lua/hosts.lua): 0 none (a host is its own), 1 by registered
--   domain, 2 given per request (its IP address); the lowest priority level
--   admitted (admit_level; levels above it are refused: Redis memory is
--   running out; -1 refuses every new URL); 1 if URLs of hosts never enqueued
--   before are admitted (admit_new_hosts); entries per bucket of the exact
--   seen store (seen_load; linear hashing, see crawlstate/lua/lhash.lua)
-- then per request, from ENQUEUE.items: the ENQUEUE_ITEM fields (URL key,
--   64-bit, decimal; its linear-hashing hash, lh_hash; host, registered
--   domain, level, flags, queue entry), [its group, when grouping is 2:
--   g = 1], the k Bloom bit offsets (decimal).
-- A host's group is recorded when a new URL of it arrives while it owns no
-- back queue (so a host's group can change between its visits, not during one).
--   flags bit 1: dont_filter (enqueue even if seen);
--   flags bit 2: exact only (skip the Bloom filter: its answer is never needed
--   for correctness, only for speed)
-- Redis CPU is the frontier's shared resource, so: numbers arrive as the
-- strings Redis takes; the writes of the whole call are gathered into a few
-- commands sent at the end (one LPUSH per back or front queue, in chunks, see
-- `batch`); budget counters and the active-host test are read once per call
-- and written once per host. The Bloom bits and the in-link sketch are not
-- written here: the worker sends them as plain BITFIELD commands right after
-- this call, in the same round trip, for every URL it sent (crawler/frontier/wire.py): a
-- command's arguments cost Redis a third of what the same values cost built
-- into a script's call.
-- Seen check: a URL added earlier in this call is a duplicate; else a Bloom
-- bit at 0 means new, unless the exact store already holds it (SADD answers
-- 0: a URL another call added, whose Bloom bits its worker had not set yet);
-- else the exact store decides (a Bloom false positive is counted and the URL
-- still enqueued). A new URL over its host's or domain's budget, or refused
-- for memory, is dropped and not recorded in the exact store (found again
-- later, it may be admitted then: its Bloom bits are set, so that counts as a
-- Bloom false positive).
-- A request whose host owns a back queue goes straight into it; otherwise it
-- waits in the front queue of its level as "<host> <entry>" until the refill
-- gives its host a back queue.
-- Every request counts as an in-link of its URL in the sketch (P..'inlinks',
-- see inlink_count in crawler/metadata/lua/urlmeta.lua), new or not: how often
-- the crawl has found the URL (the worker's BITFIELD after this call).
-- Returns ENQUEUE's reply: {added, duplicates, over host budget, over domain
-- budget, bloom false positives, refused for memory}.
local P = ARGV[ENQUEUE.prefix]
local k = tonumber(ARGV[ENQUEUE.hashes])
local host_budget = tonumber(ARGV[ENQUEUE.host_budget])
local domain_budget = tonumber(ARGV[ENQUEUE.domain_budget])
local grouping = tonumber(ARGV[ENQUEUE.grouping])
local admit_level = tonumber(ARGV[ENQUEUE.admit_level])
local admit_new_hosts = ARGV[ENQUEUE.admit_new_hosts] == '1'
local seen = lh_open(P, 'seen', P .. K.seen_exact, 'set', tonumber(ARGV[ENQUEUE.seen_load]))
local g = grouping == 2 and 1 or 0
local stride = ENQUEUE_ITEM.width + g + k
local bloom = KEYS[1]
local active = P .. K.active
local host_pages = P .. K.host_pages
local domain_pages = P .. K.domain_pages
local groups = batch('HSET', P .. K.group)
local grouped_now = {}
local queues = {}
-- Per call: pages stored per host / domain (read once), pages added per
-- host / domain (written at the end), hosts known to own a back queue, URLs
-- added.
local host_stored, host_added, domain_stored, domain_added, is_active, fresh = {}, {}, {}, {}, {}, {}
-- Pages counted for `name`: stored in the hash `key` (read once per call) plus added by this call.
local function counted(stored, added_now, key, name)
  local count = stored[name]
  if count == nil then
    count = tonumber(redis.call('HGET', key, name) or '0')
    stored[name] = count
  end
  return count + (added_now[name] or 0)
end
local function queue(key)
  local q = queues[key]
  if q == nil then
    q = batch('LPUSH', key)
    queues[key] = q
  end
  return q
end
local added, duplicates, over_host, over_domain, false_positives, refused = 0, 0, 0, 0, 0, 0
for i = ENQUEUE.items, #ARGV, stride do
  local key, h = ARGV[i + ENQUEUE_ITEM.key], ARGV[i + ENQUEUE_ITEM.lh] + 0
  local host, domain = ARGV[i + ENQUEUE_ITEM.host], ARGV[i + ENQUEUE_ITEM.domain]
  local level, flags = num(ARGV[i + ENQUEUE_ITEM.level]), num(ARGV[i + ENQUEUE_ITEM.flags])
  local offsets = i + (ENQUEUE_ITEM.width - 1) + g  -- ARGV[offsets + j] for j = 1 .. k
  local exact = lh_key(seen, h)
  local dont_filter = flags % 2 == 1
  local exact_only = flags % 4 >= 2
  local status = 'new'
  if not dont_filter then
    if fresh[key] then
      status = 'dup'
    else
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
        if redis.call('SISMEMBER', exact, key) == 1 then
          status = 'dup'
        elseif not exact_only then
          false_positives = false_positives + 1
        end
      end
    end
    if status == 'new' and host_budget > 0 and counted(host_stored, host_added, host_pages, host) >= host_budget then
      status = 'host'
    elseif status == 'new' and domain_budget > 0
        and counted(domain_stored, domain_added, domain_pages, domain) >= domain_budget then
      status = 'domain'
    end
  end
  if status == 'new' and (level > admit_level
      or (not admit_new_hosts and counted(host_stored, host_added, host_pages, host) == 0)) then
    status = 'memory'
  end
  if status == 'new' then
    fresh[key] = true
    if redis.call('SADD', exact, key) == 1 then
      seen.added = seen.added + 1
    elseif not dont_filter then
      status = 'dup'
    end
  end
  if status == 'new' then
    if not dont_filter then
      host_added[host] = (host_added[host] or 0) + 1
      domain_added[domain] = (domain_added[domain] or 0) + 1
    end
    added = added + 1
    local owned = is_active[host]
    if owned == nil then
      owned = redis.call('SISMEMBER', active, host) == 1
      is_active[host] = owned
    end
    if not owned and grouping > 0 and not grouped_now[host] then
      grouped_now[host] = true
      push2(groups, host, grouping == 2 and ARGV[i + ENQUEUE_ITEM.width] or domain)
    end
    if owned then
      push1(queue(back_key(P, host, level)), ARGV[i + ENQUEUE_ITEM.blob])
    else
      push1(queue(P .. K.front .. ARGV[i + ENQUEUE_ITEM.level]), host .. ' ' .. ARGV[i + ENQUEUE_ITEM.blob])
    end
  elseif status == 'dup' then
    duplicates = duplicates + 1
  elseif status == 'host' then
    over_host = over_host + 1
  elseif status == 'domain' then
    over_domain = over_domain + 1
  else
    refused = refused + 1
  end
end
flush(groups)
for _, q in pairs(queues) do
  flush(q)
end
for host, n in pairs(host_added) do
  redis.call('HINCRBY', host_pages, host, n)
end
for domain, n in pairs(domain_added) do
  redis.call('HINCRBY', domain_pages, domain, n)
end
if added > 0 then
  redis.call('INCRBY', P .. K.queued, added)
  redis.call('INCRBY', P .. K.seen_count, added)
end
lh_close(seen)
return {added, duplicates, over_host, over_domain, false_positives, refused}
