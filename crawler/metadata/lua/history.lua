-- A URL's fetch history: the URL-metadata script's helpers (lua/urlmeta.lua), defined once in the
-- library (a helper defined inside a script's body is a closure Redis' Lua makes again at every
-- call, with an upvalue for each local it uses).

-- The Hamming distance of two 8-byte SimHashes.
local function simhash_distance(a, b)
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

local function record_set_flag(r, flag, on)
  local has = record_has(r, flag)
  if on and not has then
    r[URLREC.flags] = r[URLREC.flags] + flag
  elseif has and not on then
    r[URLREC.flags] = r[URLREC.flags] - flag
  end
end

-- The content fields of `from` (digest, SimHash, length, outlinks and their flags) into `to`.
local function record_keep_content(to, from)
  to[URLREC.digest], to[URLREC.simhash] = from[URLREC.digest], from[URLREC.simhash]
  to[URLREC.length], to[URLREC.outlinks] = from[URLREC.length], from[URLREC.outlinks]
  record_set_flag(to, URLREC_FLAG.FLAG_DIGEST, record_has(from, URLREC_FLAG.FLAG_DIGEST))
  record_set_flag(to, URLREC_FLAG.FLAG_SIMHASH, record_has(from, URLREC_FLAG.FLAG_SIMHASH))
end

-- The in-link estimate. The in-link sketch (P .. K.inlinks, counted by the
-- enqueue script) is a counting Bloom filter of saturating 8-bit cells, one
-- BITFIELD string; a URL's cells are its first four Bloom positions modulo
-- the number of cells, and its estimate the smallest of them (never below the
-- true count, above it only where every cell collides). The worker sends the
-- cells as BITFIELD offsets ('#<cell>', sketch_offsets in
-- crawler/urls/fingerprint.py), the `cells` arguments from ARGV[first]: a number written as
-- text in Lua is a sprintf.
local function inlink_count(P, ARGV, first, cells)
  if cells == 0 then
    return 0
  elseif cells == 4 then  -- the worker's count (SKETCH_CELLS): the call without a table
    local c = redis.call('BITFIELD_RO', P .. K.inlinks, 'GET', 'u8', ARGV[first], 'GET', 'u8', ARGV[first + 1],
                         'GET', 'u8', ARGV[first + 2], 'GET', 'u8', ARGV[first + 3])
    return math.min(c[1], c[2], c[3], c[4])
  end
  local args = {'BITFIELD_RO', P .. K.inlinks}
  for i = first, first + cells - 1 do
    args[#args + 1] = 'GET'
    args[#args + 1] = 'u8'
    args[#args + 1] = ARGV[i]
  end
  return math.min(unpack(redis.call(unpack(args))))
end

-- The next visit planned from a reply's history (as the recrawl pipeline would from the item), into
-- the schedule and the record `r` of URL `key` (its caller writes it), and into the reply. The
-- revisit's arguments start at ARGV[at] (lua/urlmeta.lua).
local function history_schedule(P, key, r, reply, ARGV, at)
  local now = ARGV[at + 4] + 0
  local due, level, fraction = revisit_plan(revisit_terms(ARGV[at]), reply[2], reply[3], reply[5], now,
                                            reply[4], num(ARGV[at + 2]), reply[6], ARGV[at + 3] + 0,
                                            reply[7], reply[8], reply[9])
  local step = fraction * DUE_STEPS
  due_move(P, key, r, due, num(ARGV[at + 1]), nil, step - step % 1)
  r[URLREC.level], r[URLREC.captured] = level, ARGV[at + 5] + 0
  reply[11], reply[12] = due, level
end
