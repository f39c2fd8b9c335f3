-- Exact and near-duplicate check-and-record of one page, atomically.
-- KEYS[1]: the crawl's payload digest hash D..'digest' (digest -> "url\tdate")
-- ARGV: D (dedup key prefix), host, payload digest, "url\tdate",
--       simhash as 16 hex digits ('' for none), max Hamming distance
-- Exact: the first capture of a payload digest is recorded; a later one gets
-- it back (a revisit). Near: the 64-bit SimHash is cut into 4 blocks of 16
-- bits; two hashes within distance 3 share at least one block (pigeonhole),
-- so the candidates are the members of the 4 sets keyed by this page's blocks
-- (Manku, Jain, Das Sarma, WWW 2007). The closest candidate within the
-- distance wins; otherwise this page's SimHash joins the index.
-- Per-host counters: pages, exact duplicates, near duplicates.
-- Returns {first capture "url\tdate" or '', near url or '', distance or -1}.
local D = ARGV[1]
local host = ARGV[2]
local digest = ARGV[3]
local here = ARGV[4]
local simhash = ARGV[5]
local max_distance = tonumber(ARGV[6])
redis.call('HINCRBY', D .. DK.pages, host, 1)

local first = redis.call('HGET', KEYS[1], digest)
if first then
  redis.call('HINCRBY', D .. DK.exact, host, 1)
  return {first, '', -1}
end
redis.call('HSET', KEYS[1], digest, here)
if simhash == '' then
  return {'', '', -1}
end

local function popcount16(x)
  local count = 0
  while x > 0 do
    x = bit.band(x, x - 1)
    count = count + 1
  end
  return count
end

local blocks = {}
for i = 1, 4 do
  blocks[i] = tonumber(string.sub(simhash, 4 * i - 3, 4 * i), 16)
end
local best, best_distance = nil, max_distance + 1
for i = 1, 4 do
  local candidates = redis.call('SMEMBERS', D .. DK.block .. i .. ':' .. string.sub(simhash, 4 * i - 3, 4 * i))
  for _, candidate in ipairs(candidates) do
    local distance = 0
    for j = 1, 4 do
      distance = distance + popcount16(bit.bxor(blocks[j], tonumber(string.sub(candidate, 4 * j - 3, 4 * j), 16)))
      if distance >= best_distance then
        break
      end
    end
    if distance < best_distance then
      best, best_distance = candidate, distance
    end
  end
end
if best then
  redis.call('HINCRBY', D .. DK.near, host, 1)
  return {'', redis.call('HGET', D .. DK.simhash_url, best) or '', best_distance}
end
for i = 1, 4 do
  redis.call('SADD', D .. DK.block .. i .. ':' .. string.sub(simhash, 4 * i - 3, 4 * i), simhash)
end
redis.call('HSETNX', D .. DK.simhash_url, simhash, string.match(here, '^([^\t]*)'))
return {'', '', -1}
