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
-- The URL records' state, opened when first needed (most pages need none). No helper is defined
-- here: see lua/near.lua.
local records

if own_key ~= '' then
  records = urls_open(P, num(ARGV[11]))
  -- As Python packed it (the host by name): the metadata script stores the full record, the
  -- host by number, moments later.
  if redis.call('HSETNX', lh_key(records, lh_hash(own_key)), own_key, own_record) == 1 then
    records.added = 1
  end
end

-- The reply, and the reference (URL key, then shard) whose URL record goes into reply[at], read
-- at the end when the reference is in this shard (Python reads its URL: the part after the host
-- may be packed).
local reply, reference, at = nil, '', 6
if digest_key ~= '' then
  -- A new digest (most pages) is recorded by the one command that finds it new.
  local bucket = lh_key(digests, lh_hash(digest_key))
  if redis.call('HSETNX', bucket, digest_key, capture) == 1 then
    digests.added = 1
  else
    local first = redis.call('HGET', bucket, digest_key)
    if string.sub(first, 1, 4) == string.sub(capture, 1, 4) then
      reply, reference, at = {first, '', '', -1, '', ''}, string.sub(first, 5, 14), 2
    end
  end
end

if not reply and (simhash == '' or blocks == '') then
  reply = {'', '', '', -1, '', ''}
elseif not reply and mode == 3 then
  local found = near_reference(P, simhash)
  reply = found and {'', '', simhash, 0, found, ''} or {'', '', '', -1, '', ''}
  reference = found or ''
elseif not reply then
  -- This page's blocks held here ("0123" or a subset), each read once: the scan compares the
  -- SimHash outside block i, 24 bits at a time, with each entry filed under the block; the add
  -- appends to the entries read.
  local bxor = bit.bxor
  local held = {string.byte(blocks, 1, -1)}
  local b1, b2, b3, b4, b5, b6, b7, b8 = string.byte(simhash, 1, 8)
  local bytes = {b1, b2, b3, b4, b5, b6, b7, b8}
  local keys, fields, found = {false, false, false, false}, {false, false, false, false}, {false, false, false, false}
  local best, best_distance, best_ref = nil, max_distance + 1, ''
  for n = 1, #held do
    local i = held[n] - 48
    local key, field = near_slot(P, i, bytes[2 * i + 1], bytes[2 * i + 2])
    keys[n], fields[n] = key, field
    if mode ~= 2 then
      local entries = redis.call('HGET', key, field)
      found[n] = entries or ''
      if entries then
        -- Bytes 1-3 and 4-6 of the 6 outside block i.
        local o = 2 * i
        local x1 = 1 <= o and bytes[1] or bytes[3]
        local x2 = 2 <= o and bytes[2] or bytes[4]
        local x3 = 3 <= o and bytes[3] or bytes[5]
        local x4 = 4 <= o and bytes[4] or bytes[6]
        local x5 = 5 <= o and bytes[5] or bytes[7]
        local x6 = 6 <= o and bytes[6] or bytes[8]
        local high, low = x1 * 65536 + x2 * 256 + x3, x4 * 65536 + x5 * 256 + x6
        local width = i == 0 and 16 or 6
        for j = 1, #entries, width do
          local e1, e2, e3, e4, e5, e6 = string.byte(entries, j, j + 5)
          local distance = bits24(bxor(high, e1 * 65536 + e2 * 256 + e3))
          if distance < best_distance then
            distance = distance + bits24(bxor(low, e4 * 65536 + e5 * 256 + e6))
          end
          if distance < best_distance then
            best, best_distance = near_whole(simhash, string.sub(entries, j, j + 5), i), distance
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
      best_ref = near_reference(P, best) or ''
    end
    reply, reference = {'', '', best, best_distance, best_ref, ''}, best_ref
  else
    if mode == 1 or mode == 2 then
      for n = 1, #held do
        local i = held[n] - 48
        local entries = found[n] or redis.call('HGET', keys[n], fields[n]) or ''
        if i == 0 then
          redis.call('HSET', keys[n], fields[n], entries .. near_outside(simhash, 0) .. ref)
        else
          redis.call('HSET', keys[n], fields[n], entries .. near_outside(simhash, i))
        end
      end
    end
    reply = {'', '', '', -1, '', ''}
  end
end

if #reference >= 10 and struct.unpack('>H', reference, 9) == here then
  records = records or urls_open(P, num(ARGV[11]))
  local key = int64_decimal(string.sub(reference, 1, 8))
  local packed = redis.call('HGET', lh_key(records, lh_hash(key)), key)
  reply[at] = packed and record_external(P, packed) or ''
end
lh_close(digests)
if records then
  lh_close(records)
end
return reply
