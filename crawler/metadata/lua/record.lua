#!lua flags=no-writes
-- The URL records of some URL keys, with their host's name ('' for a URL without one).
-- KEYS[1]: the shard's URL-record state (P..K.lh..'url'; anchors the script to the shard's slot)
-- ARGV[1]: P; then URL keys.
local P = ARGV[1]
local records = urls_open(P, 1)
local out = {}
for i = 2, #ARGV do
  local key = ARGV[i]
  local packed = redis.call('HGET', lh_key(records, lh_hash(key)), key)
  out[#out + 1] = packed and record_external(P, packed) or ''
end
return out
