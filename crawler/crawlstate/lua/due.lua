-- The recrawl schedule: URL keys by due time in small sorted sets (the frontier drains it, the URL
-- metadata moves a URL in it when it records a fetch).

-- The recrawl schedule: URL keys by due time (crawl-clock seconds) in small
-- sorted sets (P..K.due_bucket..n), each holding a range of times; the index
-- P..K.due maps each bucket to its bound, the lowest time it may hold, fixed
-- when the bucket is made. Every entry of a bucket is at or above its bound and
-- below the next bucket's; a bucket over `max` entries is split in two at a
-- time boundary; an empty one is removed.
-- An entry's score is its time relative to its bucket's bound, latest first
-- (due_score): a sorted set this small (a listpack) is searched from its start
-- for where an entry goes, comparing the members of equal scores as text, and
-- where a crawl's pages get like intervals a new entry is the latest of its
-- bucket. So the score is -((t - bound) * DUE_STEPS + step), step
-- (0 .. DUE_STEPS - 1) the planned time's fraction of a second: the URLs due in
-- one second get distinct scores in the order of their exact times. Scores
-- from the bound are small integers: a listpack stores them in 3 bytes while a
-- bucket spans less than 2 hours, in 4 up to 24 days (epoch seconds took 4).
-- The earliest due URLs are at the end of the bucket of the lowest bound.

-- An entry's score: time t (whole seconds) in a bucket of bound `bound`, step 0 .. DUE_STEPS - 1.
local function due_score(t, bound, step)
  return fmt(-((t - bound) * DUE_STEPS + step))
end

-- The time of an entry scored `score` (a number) in a bucket of bound `bound`.
local function due_entry_time(bound, score)
  return bound + math.floor(-score / DUE_STEPS)
end

-- The lowest score of an entry due at or before `now` (whole seconds, at or above `bound`).
local function due_until(bound, now)
  return fmt(-((now - bound + 1) * DUE_STEPS - 1))
end

-- What a `_many` function's run knows of the schedule (as LH_RUN in lhash.lua): the sizes of the
-- buckets it touched (read once: most URLs of a run go to the same few buckets), the bucket found for
-- each time (due_find), and the change of
-- each shard's count of scheduled URLs, written once at the end of the run (due_flush; the run is
-- one call, so no other client sees the count late). False in a single call (every function sets
-- it as it starts).
local DUE_RUN = false

-- n URLs more (or fewer) in P's schedule.
local function due_counted(P, n)
  if DUE_RUN then
    DUE_RUN.counts[P] = (DUE_RUN.counts[P] or 0) + n
  elseif n > 0 then
    redis.call('INCR', P .. K.due_count)
  else
    redis.call('DECR', P .. K.due_count)
  end
end

-- The counts a run left unwritten (due_counted), at its end.
local function due_flush()
  for P, n in pairs(DUE_RUN.counts) do
    if n ~= 0 then
      redis.call('INCRBY', P .. K.due_count, fmt(n))
    end
  end
end

-- The bucket an entry of time t goes to, and its bound: the bucket of the highest bound <= t; nil
-- if every bound is above t. A run remembers the answer for each time (DUE_RUN.found: the pages of a
-- batch are often due in the same second) until the index changes (due_index_changed).
local function due_find(P, ts)
  local memo = DUE_RUN and DUE_RUN.found
  local known = memo and memo[P .. ts]
  if known then
    return known[1], known[2]
  end
  local found = redis.call('ZREVRANGEBYSCORE', P .. K.due, ts, '-inf', 'WITHSCORES', 'LIMIT', '0', '1')
  if found[1] then
    if memo then
      memo[P .. ts] = {found[1], found[2] + 0}
    end
    return found[1], found[2] + 0
  end
  return nil, nil
end

-- The index changed (a bucket made or removed): what due_find remembers for the run is forgotten.
local function due_index_changed()
  if DUE_RUN then
    DUE_RUN.found = {}
  end
end

local function due_take(P, b, key)
  local bucket = P .. K.due_bucket .. b
  if redis.call('ZREM', bucket, key) == 0 then
    return false
  end
  due_counted(P, -1)
  local sizes = DUE_RUN and DUE_RUN.sizes
  local empty
  if sizes and sizes[bucket] then
    sizes[bucket] = sizes[bucket] - 1
    empty = sizes[bucket] == 0
  else
    empty = redis.call('EXISTS', bucket) == 0
  end
  if empty then
    redis.call('ZREM', P .. K.due, b)
    due_index_changed()
  end
  return true
end

-- An entry of time t is in the bucket due_find gives, or (after a split
-- among equal times, which leaves the upper half in a bucket of the same
-- bound) in one whose bound is t: the buckets from the highest bound <= t
-- down to the first bound below t.
local function due_remove(P, key, t)
  local offset = 0
  local found
  local ts = fmt(t)
  repeat
    found = redis.call('ZREVRANGEBYSCORE', P .. K.due, ts, '-inf', 'WITHSCORES', 'LIMIT', offset, 8)
    for i = 1, #found, 2 do
      if due_take(P, found[i], key) then
        return true
      end
      if found[i + 1] + 0 < t then
        return false
      end
    end
    offset = offset + 8
  until #found < 16
  return false  -- (no bound <= t: a bucket's entries are never below its bound, so t is not scheduled)
end

-- An entry of time t, `step` (due_score; 0 if none given) into the bucket due_find gives, or into a
-- new bucket of bound t when every bound is above t (a bound never moves, the scores depend on it).
-- A bucket that passes max entries is split in two by rank (its later half
-- moves to a new bucket whose bound is the half's first time, the scores made
-- relative to it), so a bucket never holds more than max + 1 entries, equal
-- times included.
local function due_insert(P, key, t, max, ts, step)
  ts = ts or fmt(t)
  local b, bound = due_find(P, ts)
  if not b then
    b, bound = fmt(redis.call('INCR', P .. K.due_sequence)), t
    redis.call('ZADD', P .. K.due, ts, b)
    due_index_changed()
  end
  local bucket = P .. K.due_bucket .. b
  local added = redis.call('ZADD', bucket, due_score(t, bound, step or 0), key) == 1
  if added then
    due_counted(P, 1)
  end
  local sizes = DUE_RUN and DUE_RUN.sizes
  local n
  if sizes and sizes[bucket] then
    n = sizes[bucket] + (added and 1 or 0)
  else
    n = redis.call('ZCARD', bucket)
  end
  if sizes then
    sizes[bucket] = n
  end
  if n <= max then
    return
  end
  local half = math.floor(n / 2)
  local later = n - half  -- the first ranks: latest first
  local moving = redis.call('ZRANGE', bucket, 0, later - 1, 'WITHSCORES')
  local fresh_bound = due_entry_time(bound, moving[#moving] + 0)
  local shift = (fresh_bound - bound) * DUE_STEPS
  local fresh = fmt(redis.call('INCR', P .. K.due_sequence))
  local add = batch('ZADD', P .. K.due_bucket .. fresh)
  for i = #moving - 1, 1, -2 do  -- the earliest first, so that each goes to the start
    push2(add, fmt(moving[i + 1] + shift), moving[i])
  end
  flush(add)
  redis.call('ZREMRANGEBYRANK', bucket, 0, later - 1)
  redis.call('ZADD', P .. K.due, fmt(fresh_bound), fresh)
  due_index_changed()
  if sizes then
    sizes[bucket], sizes[P .. K.due_bucket .. fresh] = half, later
  end
end

-- A URL moved in the recrawl schedule to time t (`step`: due_insert): out of where its record `r`
-- says it is (next_visit), in at t, and r's next_visit set (its caller writes r).
local function due_move(P, key, r, t, max, ts, step)
  if r[URLREC.next_visit] > 0 then
    due_remove(P, key, r[URLREC.next_visit])
  end
  due_insert(P, key, t, max, ts, step)
  r[URLREC.next_visit] = t
end
