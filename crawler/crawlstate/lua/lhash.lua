-- Linear hashing: the compact structures of a shard (the exact seen set, the URL records, the
-- exact duplicate index), each a growing set of small keys. Python's side: crawler/crawlstate/compact.py.

-- Linear hashing (Litwin, 1980): a structure that grows one small key at a
-- time, so each key stays in Redis' compact encodings (an intset, a
-- listpack) whatever the crawl's size. Its state, P..K.lh..name, is
-- struct '>BI4I8' (L, s, n): 2^L + s buckets (bucket b is key base..b), n
-- entries. An entry's hash h (lh_hash) is taken from its 64-bit key; it lives
-- in bucket h mod 2^L, or h mod 2^(L+1) when that is below the split pointer
-- s. When n passes `load` entries per bucket, bucket s is split: its entries
-- with bit L of h set move to bucket s + 2^L. Python finds a bucket the same
-- way (crawler/crawlstate/compact.py).
local LH_MOD = 16777216

local LH_STATE = '>BI4I8'

-- The hash of a 64-bit URL key written in decimal: its absolute value's last 9
-- digits, mod 2^24 (URL keys are uniform, so these are too, within 2% at 2^24
-- buckets). One number conversion (`+ 0`, values.lua): Redis' Lua parses a number with strtod,
-- and every split hashes a whole bucket.
local function lh_hash(decimal)
  local h = string.sub(decimal, -9) + 0
  if h < 0 then
    h = -h
  end
  return h % LH_MOD
end

-- The states a `_many` function's run (crawler/crawlstate/schema.py _LIBRARY_MANY) has open, by key: its calls
-- read a state once and write its count once, at the end of the run (lh_flush), unless they split a
-- bucket (the split's state is written at once). A count written late, or not at all if the run
-- fails, only delays a split. False in a single call (every function sets it as it starts).
local LH_RUN = false

local function lh_open(P, name, base, kind, load)
  local state = P .. K.lh .. name
  local lh = LH_RUN and LH_RUN[state]
  if lh then
    lh.load, lh.added = math.max(1, load), 0
    return lh
  end
  local raw = redis.call('GET', state)
  local L, s, n = 0, 0, 0
  if raw then
    L, s, n = struct.unpack(LH_STATE, raw)
  end
  lh = {state = state, base = base, kind = kind, load = math.max(1, load), L = L, s = s, n = n, added = 0,
        dirty = false}
  if LH_RUN then
    LH_RUN[state] = lh
  end
  return lh
end

local function lh_key(lh, h)
  local size = 2 ^ lh.L
  local b = h % size
  if b < lh.s then
    b = h % (2 * size)
  end
  return lh.base .. fmt(b)
end

-- Count the new entries (lh.added); split while over the load; save the state.
-- Called once at the end of a script or call (its lookups used the state it read).
local function lh_close(lh)
  if lh.added == 0 then
    return
  end
  lh.n = lh.n + lh.added
  lh.added = 0
  if LH_RUN and not (lh.n > lh.load * (2 ^ lh.L + lh.s) and lh.L < 24) then
    lh.dirty = true
    return
  end
  while lh.n > lh.load * (2 ^ lh.L + lh.s) and lh.L < 24 do
    local size = 2 ^ lh.L
    local from = lh.base .. fmt(lh.s)
    local to = lh.base .. fmt(lh.s + size)
    -- The bucket is read, deleted and written again with the entries that stay: a removal from a
    -- listpack or an intset moves everything after the entry, so an HDEL or SREM of each entry
    -- that moves made the split a quadratic copy (an intset of 2,000 URL keys, 16 KB, moved about
    -- half of it a thousand times). An intset's members come sorted and go back in order: appended.
    if lh.kind == 'hash' then
      local entries = redis.call('HGETALL', from)
      redis.call('DEL', from)
      local moving, staying = batch('HSET', to), batch('HSET', from)
      for i = 1, #entries, 2 do
        if lh_hash(entries[i]) % (2 * size) ~= lh.s then
          push2(moving, entries[i], entries[i + 1])
        else
          push2(staying, entries[i], entries[i + 1])
        end
      end
      flush(moving)
      flush(staying)
    else
      local members = redis.call('SMEMBERS', from)
      redis.call('DEL', from)
      local moving, staying = batch('SADD', to), batch('SADD', from)
      for _, member in ipairs(members) do
        if lh_hash(member) % (2 * size) ~= lh.s then
          push1(moving, member)
        else
          push1(staying, member)
        end
      end
      flush(moving)
      flush(staying)
    end
    lh.s = lh.s + 1
    if lh.s == size then
      lh.L = lh.L + 1
      lh.s = 0
    end
  end
  lh.dirty = false
  redis.call('SET', lh.state, struct.pack(LH_STATE, lh.L, lh.s, lh.n))
end

-- The counts a many form's calls left unwritten (lh_close), at the end of its run.
local function lh_flush()
  for state, lh in pairs(LH_RUN) do
    if lh.dirty then
      lh.dirty = false
      redis.call('SET', state, struct.pack(LH_STATE, lh.L, lh.s, lh.n))
    end
  end
end
