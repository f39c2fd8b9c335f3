#!lua
-- Exact and near-duplicate check-and-record, in one frontier shard.
-- KEYS[1]: the shard's exact-index state P..K.lh..'dx' (anchors the script to the shard's slot)
-- ARGV[1]: P; ARGV[2]: this shard's number;
-- ARGV[3]: payload digest key (its first 8 bytes as a signed integer; '' = no exact check);
-- ARGV[4]: the first-capture value to record: 4 more digest bytes, the URL key (8 bytes),
--   the URL's shard (uint16), the capture time (uint64, epoch microseconds), all big-endian;
-- ARGV[5]: SimHash (8 bytes, big-endian; '' = none); ARGV[6]: the SimHash blocks held here
--   ("0123", a subset, or ''); ARGV[7]: the largest distance of a near duplicate;
-- ARGV[8]: mode: 0 check, 1 check and add when neither an exact nor a near
--   duplicate is found, 2 add only, 3 find the reference stored with this
--   SimHash (in block 0);
-- ARGV[9]: the reference stored with block 0: URL key (8 bytes) and shard (uint16);
-- ARGV[10], ARGV[11]: exact-index and URL-record entries per bucket (linear hashing);
-- ARGV[12], ARGV[13]: the page's own URL key and a record of its URL ('' = not written here):
--   written first if the URL has no record yet, so that a duplicate found
--   later can always name it (only when no URL-record pipeline writes it).
-- Exact: the first capture of a payload digest is recorded; a later one gets
-- it back (a revisit); the 4 more digest bytes must match too (96 bits).
-- Near: the 64-bit SimHash is cut into 4 blocks of 16 bits; two hashes within
-- distance 3 share at least one block (pigeonhole), so the candidates are the
-- SimHashes filed under this page's blocks (Manku, Jain, Das Sarma, WWW 2007):
-- block i of value v is in hash P..K.near..'<i>:<v div 256>:<v div 16 mod 16>',
-- field v mod 16, a string of entries: the 6 bytes of the SimHash outside
-- block i (the block's 2 bytes are the key and field), and under block 0 its
-- reference too (16-byte entries). The closest candidate within the distance
-- wins. A hash holds 16 fields, so that a read or write of one scans a short
-- listpack (layout 3 filed 256 fields a hash: up to 512 listpack entries
-- scanned by each of a page's 8 reads and writes, the whole listpack moved
-- by each write).
-- A URL key whose shard is this one is resolved to its URL here.
-- Returns {first capture value or '', its URL record or '', near SimHash or '',
--          distance or -1, its reference or '', its URL record or ''}.
local P, here = ARGV[1], num(ARGV[2])
local digest_key, capture = ARGV[3], ARGV[4]
local simhash, blocks, max_distance, mode = ARGV[5], ARGV[6], num(ARGV[7]), num(ARGV[8])
local ref = ARGV[9]
local digests = lh_open(P, 'dx', P .. K.digests, 'hash', num(ARGV[10]))
local own_key, own_record = ARGV[12], ARGV[13]
-- The URL records' state, read when first needed (most pages need none).
local records
local function opened()
  if not records then
    records = urls_open(P, num(ARGV[11]))
  end
  return records
end

local function finish(...)
  lh_close(digests)
  if records then
    lh_close(records)
  end
  return {...}
end

if own_key ~= '' then
  local records = opened()
  -- As Python packed it (the host by name): the metadata script stores the full record, the
  -- host by number, moments later.
  if redis.call('HSETNX', lh_key(records, lh_hash(own_key)), own_key, own_record) == 1 then
    records.added = 1
  end
end

-- The record of a reference (URL key, then shard), when it is in this shard
-- (Python reads its URL: the part after the host may be packed).
local function url_of(reference)
  if #reference < 10 or struct.unpack('>H', reference, 9) ~= here then
    return ''
  end
  local key = int64_decimal(string.sub(reference, 1, 8))
  local packed = redis.call('HGET', lh_key(opened(), lh_hash(key)), key)
  return packed and record_external(P, packed) or ''
end

if digest_key ~= '' then
  -- A new digest (most pages) is recorded by the one command that finds it new.
  local bucket = lh_key(digests, lh_hash(digest_key))
  if redis.call('HSETNX', bucket, digest_key, capture) == 1 then
    digests.added = 1
  else
    local first = redis.call('HGET', bucket, digest_key)
    if string.sub(first, 1, 4) == string.sub(capture, 1, 4) then
      return finish(first, url_of(string.sub(first, 5, 14)), '', -1, '', '')
    end
  end
end
if simhash == '' or blocks == '' then
  return finish('', '', '', -1, '', '')
end

-- The hash and field of a block whose two bytes are high and low (decimal bytes from a table, not
-- string.format: a C function call costs Redis' Lua as much as dozens of lines of arithmetic).
local function near_slot(i, high, low)
  local field = low % 16
  return P .. K.near .. BYTE_DECIMAL[i] .. ':' .. BYTE_DECIMAL[high] .. ':' .. BYTE_DECIMAL[(low - field) / 16],
         BYTE_DECIMAL[field]
end

-- Block i of this page: its hash and field.
local function block_of(i)
  local high, low = string.byte(simhash, 2 * i + 1, 2 * i + 2)
  return near_slot(i, high, low)
end

-- A SimHash without block i (6 bytes), and whole again.
local function outside(h, i)
  if i == 0 then
    return string.sub(h, 3, 8)
  elseif i == 3 then
    return string.sub(h, 1, 6)
  end
  return string.sub(h, 1, 2 * i) .. string.sub(h, 2 * i + 3, 8)
end

local function whole(rest, i)
  return string.sub(rest, 1, 2 * i) .. string.sub(simhash, 2 * i + 1, 2 * i + 2) .. string.sub(rest, 2 * i + 1, 6)
end

-- The reference filed with a SimHash under its block 0 (when that is in this shard).
local function reference_of(h)
  local entries = redis.call('HGET', near_slot(0, string.byte(h, 1, 2))) or ''
  local rest = outside(h, 0)
  for j = 1, #entries, 16 do
    if string.sub(entries, j, j + 5) == rest then
      return string.sub(entries, j + 6, j + 15)
    end
  end
  return nil
end

if mode == 3 then
  local found = reference_of(simhash)
  if found then
    return finish('', '', simhash, 0, found, url_of(found))
  end
  return finish('', '', '', -1, '', '')
end

-- Bits set in a 24-bit number (SWAR: no loop, no table).
local band, rshift, bxor = bit.band, bit.rshift, bit.bxor
local function bits24(x)
  x = x - band(rshift(x, 1), 0x555555)
  x = band(x, 0x333333) + band(rshift(x, 2), 0x333333)
  x = band(x + rshift(x, 4), 0x0F0F0F)
  return band(x, 0xFF) + band(rshift(x, 8), 0xFF) + rshift(x, 16)
end

-- This page's blocks held here ("0123" or a subset), each read once: the scan compares the
-- SimHash outside block i, 24 bits at a time, with each entry filed under the block; the add
-- appends to the entries read.
local held = {string.byte(blocks, 1, -1)}
local bytes = {string.byte(simhash, 1, 8)}
local keys, fields, found = {}, {}, {}
-- Byte k of the 6 outside block i.
local function nth_outside(k, i)
  return k <= 2 * i and bytes[k] or bytes[k + 2]
end
local best, best_distance, best_ref = nil, max_distance + 1, ''
for n = 1, #held do
  local i = held[n] - 48
  local key, field = block_of(i)
  keys[n], fields[n] = key, field
  if mode ~= 2 then
    local entries = redis.call('HGET', key, field)
    found[n] = entries or ''
    if entries then
      local high = nth_outside(1, i) * 65536 + nth_outside(2, i) * 256 + nth_outside(3, i)
      local low = nth_outside(4, i) * 65536 + nth_outside(5, i) * 256 + nth_outside(6, i)
      local width = i == 0 and 16 or 6
      for j = 1, #entries, width do
        local e1, e2, e3, e4, e5, e6 = string.byte(entries, j, j + 5)
        local distance = bits24(bxor(high, e1 * 65536 + e2 * 256 + e3))
        if distance < best_distance then
          distance = distance + bits24(bxor(low, e4 * 65536 + e5 * 256 + e6))
        end
        if distance < best_distance then
          best, best_distance = whole(string.sub(entries, j, j + 5), i), distance
          best_ref = i == 0 and string.sub(entries, j + 6, j + 15) or ''
        end
      end
    end
  end
end
if best then
  if best_ref == '' and string.find(blocks, '0', 1, true) then
    -- Found under another block: its reference is filed under its block 0, here too on one shard
    -- (else the caller asks the shard of that block).
    best_ref = reference_of(best) or ''
  end
  return finish('', '', best, best_distance, best_ref, url_of(best_ref))
end
if mode == 1 or mode == 2 then
  for n = 1, #held do
    local i = held[n] - 48
    local entries = found[n] or redis.call('HGET', keys[n], fields[n]) or ''
    if i == 0 then
      redis.call('HSET', keys[n], fields[n], entries .. outside(simhash, 0) .. ref)
    else
      redis.call('HSET', keys[n], fields[n], entries .. outside(simhash, i))
    end
  end
end
return finish('', '', '', -1, '', '')
