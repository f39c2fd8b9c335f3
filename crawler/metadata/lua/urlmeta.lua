-- Record a fetch of one URL, keeping its change history.
-- KEYS[1]: the host's metadata hash (field: 8-byte URL fingerprint)
-- ARGV: field, new record (msgpack array, see crawler/metadata/store.py),
--       SimHash change threshold, shard prefix P, host, flags (1: the fetch
--       is an error, 2: a near duplicate), in-link sketch positions (the
--       URL's Bloom positions, little-endian uint32; '' = none), sketch cells,
--       repeat window (seconds; 0 = none)
-- A repeat delivery changes nothing: a fetch with the stored status and
-- payload digest, less than the repeat window from the stored fetch, before or
-- after it (a URL fetched again because its lease expired, whose two records
-- may arrive in either order, or a record stored twice), leaves
-- the record and the host's counters as they are, so storing a page twice is
-- the same as storing it once.
-- A 304 Not Modified keeps the last content fields: an unchanged observation.
-- A fetch counts as a change when the payload digest differs from the last
-- one AND the SimHash distance is above the threshold (or a SimHash is
-- missing), so a rotating timestamp or banner alone is not a change. A
-- fetch that records no digest (a failure) is not an observation.
-- Returns {changed (1, 0; -1 for a first fetch), observations, changes,
--          previous fetch time (0 if none), first observation time,
--          in-link estimate, host pages, host errors, host near duplicates,
--          repeat (1: a repeat delivery, nothing recorded)}.
local field = ARGV[1]
local new = cmsgpack.unpack(ARGV[2])
local threshold = tonumber(ARGV[3])
local P, host, flags, positions, cells = ARGV[4], ARGV[5], tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8])
local window = tonumber(ARGV[9] or '0')
-- Record layout: URLMETA (generated from crawler/metadata/store.py, see crawler/schema.py).
local DIGEST, SIMHASH, OBS, CHANGES = URLMETA.digest8, URLMETA.simhash8, URLMETA.observations, URLMETA.changes
local FETCHED, NEXT, FIRST = URLMETA.fetched_at, URLMETA.next_visit, URLMETA.first_fetch
local STATUS, ETAG, LAST_MODIFIED = URLMETA.status, URLMETA.etag, URLMETA.last_modified
local LENGTH, OUTLINKS = URLMETA.length, URLMETA.outlinks

local function distance(a, b)
  local d = 0
  for i = 1, 8 do
    local x = bit.bxor(string.byte(a, i), string.byte(b, i))
    while x > 0 do
      x = bit.band(x, x - 1)
      d = d + 1
    end
  end
  return d
end

local function inlink_count()
  if positions ~= '' and cells > 0 then
    return inlink_estimate(P .. K.inlinks, positions, cells)
  end
  return 0
end

local quality = P .. K.host_quality
local old_packed = redis.call('HGET', KEYS[1], field)
local changed, previous = -1, 0
if old_packed then
  local old = cmsgpack.unpack(old_packed)
  local since = (new[FETCHED] or 0) - (old[FETCHED] or 0)
  if window > 0 and math.abs(since) < window and new[STATUS] == old[STATUS]
      and type(new[DIGEST]) == 'string' and #new[DIGEST] == 8 and new[DIGEST] == old[DIGEST] then
    local counts = redis.call('HMGET', quality, host .. '|n', host .. '|e', host .. '|d')
    return {0, old[OBS] or 0, old[CHANGES] or 0, old[FETCHED] or 0, old[FIRST] or 0, inlink_count(),
            tonumber(counts[1] or '0'), tonumber(counts[2] or '0'), tonumber(counts[3] or '0'), 1}
  end
  previous = old[FETCHED] or 0
  new[OBS] = old[OBS] or 0
  new[CHANGES] = old[CHANGES] or 0
  new[FIRST] = old[FIRST] or 0
  if new[NEXT] == 0 then
    new[NEXT] = old[NEXT] or 0
  end
  if new[STATUS] == 304 and type(old[DIGEST]) == 'string' and #old[DIGEST] == 8 then
    -- Not modified: the stored content stands (validators refreshed if sent).
    new[DIGEST], new[SIMHASH], new[LENGTH], new[OUTLINKS] = old[DIGEST], old[SIMHASH], old[LENGTH], old[OUTLINKS]
    if new[ETAG] == '' then new[ETAG] = old[ETAG] end
    if new[LAST_MODIFIED] == 0 then new[LAST_MODIFIED] = old[LAST_MODIFIED] end
  end
  if type(new[DIGEST]) == 'string' and #new[DIGEST] == 8 then
    if type(old[DIGEST]) == 'string' and #old[DIGEST] == 8 then
      changed = 0
      if new[DIGEST] ~= old[DIGEST] then
        local far = true
        if type(new[SIMHASH]) == 'string' and type(old[SIMHASH]) == 'string'
            and #new[SIMHASH] == 8 and #old[SIMHASH] == 8 then
          far = distance(new[SIMHASH], old[SIMHASH]) > threshold
        end
        if far then
          changed = 1
        end
      end
      new[OBS] = new[OBS] + 1
      new[CHANGES] = new[CHANGES] + changed
    else
      new[OBS] = new[OBS] + 1
      new[FIRST] = new[FETCHED]
    end
  else
    -- A failed fetch keeps the last good content fields.
    new[DIGEST], new[SIMHASH] = old[DIGEST], old[SIMHASH]
    new[ETAG], new[LAST_MODIFIED], new[LENGTH], new[OUTLINKS] = old[ETAG], old[LAST_MODIFIED], old[LENGTH], old[OUTLINKS]
  end
else
  new[OBS] = (type(new[DIGEST]) == 'string' and #new[DIGEST] == 8) and 1 or 0
  new[CHANGES] = 0
  new[FIRST] = new[OBS] == 1 and new[FETCHED] or 0
end
if new[OBS] > 0 and (new[FIRST] or 0) == 0 then
  new[FIRST] = new[FETCHED]
end
redis.call('HSET', KEYS[1], field, cmsgpack.pack(new))

-- The host's quality counters (pages, errors, near duplicates).
local pages = redis.call('HINCRBY', quality, host .. '|n', 1)
local errors = tonumber(redis.call('HGET', quality, host .. '|e') or '0')
local near = tonumber(redis.call('HGET', quality, host .. '|d') or '0')
if flags % 2 == 1 then
  errors = redis.call('HINCRBY', quality, host .. '|e', 1)
end
if math.floor(flags / 2) % 2 == 1 then
  near = redis.call('HINCRBY', quality, host .. '|d', 1)
end

-- The in-link estimate: the smallest of the URL's sketch counters.
return {changed, new[OBS], new[CHANGES], previous, new[FIRST], inlink_count(), pages, errors, near, 0}
