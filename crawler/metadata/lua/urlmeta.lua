-- Record a fetch of one URL, keeping its change history.
-- KEYS[1]: the host's metadata hash (field: 8-byte URL fingerprint)
-- ARGV: field, new record (msgpack array, see crawler/metadata/store.py),
--       SimHash change threshold
-- A fetch counts as a change when the payload digest differs from the last
-- one AND the SimHash distance is above the threshold (or a SimHash is
-- missing), so a rotating timestamp or banner alone is not a change. A
-- fetch that records no digest (a failure) is not an observation.
-- Returns {changed (1, 0; -1 for a first fetch), observations, changes,
--          previous fetch time (0 if none)}.
local field = ARGV[1]
local new = cmsgpack.unpack(ARGV[2])
local threshold = tonumber(ARGV[3])
-- Record layout (1-based): 1 version, 2 state, 3 fetched_at, 4 status,
-- 5 digest (8 bytes), 6 simhash (8 bytes), 7 etag, 8 last_modified,
-- 9 length, 10 outlinks, 11 observations, 12 changes, 13 next_visit
local DIGEST, SIMHASH, OBS, CHANGES, FETCHED = 5, 6, 11, 12, 3

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

local old_packed = redis.call('HGET', KEYS[1], field)
local changed, previous = -1, 0
if old_packed then
  local old = cmsgpack.unpack(old_packed)
  previous = old[FETCHED] or 0
  new[OBS] = old[OBS] or 0
  new[CHANGES] = old[CHANGES] or 0
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
    end
  else
    -- A failed fetch keeps the last good content fields.
    new[DIGEST], new[SIMHASH] = old[DIGEST], old[SIMHASH]
    new[7], new[8], new[9], new[10] = old[7], old[8], old[9], old[10]
  end
else
  new[OBS] = (type(new[DIGEST]) == 'string' and #new[DIGEST] == 8) and 1 or 0
  new[CHANGES] = 0
end
redis.call('HSET', KEYS[1], field, cmsgpack.pack(new))
return {changed, new[OBS], new[CHANGES], previous}
