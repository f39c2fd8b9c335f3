#!lua
-- Record a fetch of one URL, keeping its change history, and schedule its next visit.
-- KEYS[1]: the shard's URL-record state (P..K.lh..'url'; anchors the script to the shard's slot)
-- ARGV: URL key, new record (crawler/metadata/record.py, without history),
--       SimHash change threshold, shard prefix P, host, flags (1: the fetch
--       is an error, 2: a near duplicate), repeat window (seconds; 0 = none),
--       URL records per bucket (linear hashing, see crawlstate/lua/lhash.lua), the number n
--       of the URL's cells in the in-link sketch, then those n cells as
--       BITFIELD offsets ('#<cell>', crawler/urls/fingerprint.py
--       sketch_offsets; none: no estimate); then, for a URL to revisit, six
--       more: the recrawl policy's terms (crawler/policy/recrawl.py
--       revisit_terms), entries per due bucket at most, the URL's depth, its
--       host's importance (0..1), this fetch's time (crawl clock, seconds,
--       with a fraction), the capture time of its payload (epoch us).
-- A repeat delivery changes nothing: a fetch with the stored status and
-- payload digest, less than the repeat window from the stored fetch, before or
-- after it (a URL fetched again because its lease expired, whose two records
-- may arrive in either order, or a record stored twice), leaves
-- the record's history and the host's counters as they are, so storing a page
-- twice is the same as storing it once.
-- A 304 Not Modified keeps the last content fields: an unchanged observation.
-- A fetch counts as a change when the payload digest differs from the last
-- one AND the SimHash distance is above the threshold (or a SimHash is
-- missing), so a rotating timestamp or banner alone is not a change. A
-- fetch that records no digest (a failure) is not an observation. Without a
-- revisit the schedule's fields (next visit, level, capture time) stay as
-- they were; with one, the next visit is planned from the history after this
-- fetch (crawler/policy/lua/revisit.lua) and the URL moved in the recrawl
-- schedule (a URL is in it at most once: its record's next_visit says where),
-- the record written once with it.
-- Returns {changed (1, 0; -1 for a first fetch), observations, changes,
--          previous fetch time (0 if none), first observation time,
--          in-link estimate, host pages, host errors, host near duplicates,
--          repeat (1: a repeat delivery, nothing recorded),
--          next visit (crawl-clock s; 0: none planned), its level}.
local key = ARGV[1]
local new = record_unpack(ARGV[2])
local threshold = num(ARGV[3])
local P, host, flags = ARGV[4], ARGV[5], num(ARGV[6])
local window = num(ARGV[7])
local records = urls_open(P, num(ARGV[8]))
local cells = num(ARGV[9])
local revisit = 10 + cells  -- the revisit's first argument, if any
local plan = #ARGV >= revisit + 5
local DIGEST, SIMHASH = URLREC_FLAG.FLAG_DIGEST, URLREC_FLAG.FLAG_SIMHASH

-- The helpers are lua/history.lua's.
local quality = P .. K.host_quality
local bucket = lh_key(records, lh_hash(key))
local old_packed = redis.call('HGET', bucket, key)
local changed, previous = -1, 0
local new_digest = record_has(new, DIGEST)
if old_packed then
  local old = record_unpack(old_packed)
  local since = new[URLREC.fetched_at] - old[URLREC.fetched_at]
  if window > 0 and math.abs(since) < window and new[URLREC.status] == old[URLREC.status]
      and new_digest and record_has(old, DIGEST) and new[URLREC.digest] == old[URLREC.digest] then
    local counts = redis.call('HMGET', quality, host .. '|n', host .. '|e', host .. '|d')
    local reply = {0, old[URLREC.observations], old[URLREC.changes], old[URLREC.fetched_at],
                   old[URLREC.first_fetch], inlink_count(P, ARGV, 10, cells),
                   (counts[1] or '0') + 0, (counts[2] or '0') + 0, (counts[3] or '0') + 0, 1, 0, 0}
    if plan then
      history_schedule(P, key, old, reply, ARGV, revisit)
      redis.call('HSET', bucket, key, record_pack(old))
      lh_close(records)
    end
    return reply
  end
  previous = old[URLREC.fetched_at]
  new[URLREC.observations] = old[URLREC.observations]
  new[URLREC.changes] = old[URLREC.changes]
  new[URLREC.first_fetch] = old[URLREC.first_fetch]
  new[URLREC.next_visit] = old[URLREC.next_visit]
  new[URLREC.level] = old[URLREC.level]
  if new[URLREC.captured] == 0 then
    new[URLREC.captured] = old[URLREC.captured]
  end
  if new[URLREC.status] == 304 and record_has(old, DIGEST) then
    -- Not modified: the stored content stands (validators refreshed if sent).
    record_keep_content(new, old)
    new_digest = true
    if new.etag == '' then new.etag = old.etag end
    if new[URLREC.last_modified] == 0 then new[URLREC.last_modified] = old[URLREC.last_modified] end
  end
  if new_digest then
    if record_has(old, DIGEST) then
      changed = 0
      if new[URLREC.digest] ~= old[URLREC.digest] then
        local far = true
        if record_has(new, SIMHASH) and record_has(old, SIMHASH) then
          far = simhash_distance(new[URLREC.simhash], old[URLREC.simhash]) > threshold
        end
        if far then
          changed = 1
        end
      end
      new[URLREC.observations] = math.min(65535, new[URLREC.observations] + 1)
      new[URLREC.changes] = math.min(65535, new[URLREC.changes] + changed)
    else
      new[URLREC.observations] = math.min(65535, new[URLREC.observations] + 1)
      new[URLREC.first_fetch] = new[URLREC.fetched_at]
    end
  else
    -- A failed fetch keeps the last good content fields.
    record_keep_content(new, old)
    new.etag, new[URLREC.last_modified] = old.etag, old[URLREC.last_modified]
  end
else
  new[URLREC.observations] = new_digest and 1 or 0
  new[URLREC.changes] = 0
  new[URLREC.first_fetch] = new_digest and new[URLREC.fetched_at] or 0
  records.added = 1
end
if new[URLREC.observations] > 0 and new[URLREC.first_fetch] == 0 then
  new[URLREC.first_fetch] = new[URLREC.fetched_at]
end
-- The host's quality counters (pages, errors, near duplicates).
local pages = redis.call('HINCRBY', quality, host .. '|n', '1')
local counts = redis.call('HMGET', quality, host .. '|e', host .. '|d')
local errors, near = (counts[1] or '0') + 0, (counts[2] or '0') + 0
if flags % 2 == 1 then
  errors = redis.call('HINCRBY', quality, host .. '|e', '1')
end
if flags % 4 >= 2 then
  near = redis.call('HINCRBY', quality, host .. '|d', '1')
end
local reply = {changed, new[URLREC.observations], new[URLREC.changes], previous, new[URLREC.first_fetch],
               inlink_count(P, ARGV, 10, cells), pages, errors, near, 0, 0, 0}
if plan then
  history_schedule(P, key, new, reply, ARGV, revisit)
end
record_intern(P, new)
redis.call('HSET', bucket, key, record_pack(new))
lh_close(records)
return reply
