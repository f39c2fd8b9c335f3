-- URL records: their buckets, their packing (URLREC, crawler/crawlstate/schema.py) and their hosts
-- kept as a shard's numbers.

-- URL records (crawler/metadata/record.py): a binary head (URLREC_FORMAT),
-- the ETag, then the URL after its scheme, in the buckets P..K.urls (linear
-- hashing 'url'). A record's host is the first host_len bytes of its tail.
local function urls_open(P, load)
  return lh_open(P, 'url', P .. K.urls, 'hash', load)
end

local function record_unpack(packed)
  local r = {struct.unpack(URLREC_FORMAT, packed)}
  local pos = r[#r]
  r[#r] = nil
  local etag_len = r[URLREC.etag_len]
  r.etag = string.sub(packed, pos, pos + etag_len - 1)
  r.tail = string.sub(packed, pos + etag_len)
  return r
end

local function record_pack(r)
  r[URLREC.etag_len] = #r.etag
  return struct.pack(URLREC_FORMAT, unpack(r, 1, URLREC_COUNT)) .. r.etag .. r.tail
end

local function record_has(r, flag)
  return r[URLREC.flags] % (2 * flag) >= flag  -- (arithmetic: math.floor is a C function call)
end

-- A stored record keeps its host as a 3-byte number of the shard
-- (URLREC_FLAG.FLAG_HOST_ID; K.host_ids, K.host_names), not its name: the
-- scripts store records so (record_intern) and hand them out with the name
-- again (record_external); Python only sees names. Past 2^24 hosts in a
-- shard, records keep the name.
local HOST_ID = URLREC_FLAG.FLAG_HOST_ID

local function host_number(P, host)
  local id = redis.call('HGET', P .. K.host_ids, host)
  if id then
    return id + 0
  end
  id = redis.call('INCR', P .. K.host_sequence)
  if id >= 16777216 then
    return nil
  end
  redis.call('HSET', P .. K.host_ids, host, id)
  redis.call('HSET', P .. K.host_names, id, host)
  return id
end

local function record_intern(P, r)
  local n = r[URLREC.host_len]
  if n == 0 or record_has(r, HOST_ID) then
    return
  end
  local id = host_number(P, string.sub(r.tail, 1, n))
  if id then
    local low, mid = id % 256, id % 65536
    r.tail = string.char((id - mid) / 65536, (mid - low) / 256, low) .. string.sub(r.tail, n + 1)
    r[URLREC.host_len] = 3
    r[URLREC.flags] = r[URLREC.flags] + HOST_ID
  end
end

local function record_host(P, r)
  local head = string.sub(r.tail, 1, r[URLREC.host_len])
  if record_has(r, HOST_ID) then
    local a, b, c = string.byte(head, 1, 3)
    return redis.call('HGET', P .. K.host_names, a * 65536 + b * 256 + c) or ''
  end
  return head
end

local function record_external(P, packed)
  local r = record_unpack(packed)
  if not record_has(r, HOST_ID) then
    return packed
  end
  local host = record_host(P, r)
  r.tail = host .. string.sub(r.tail, 4)
  r[URLREC.host_len] = #host
  r[URLREC.flags] = r[URLREC.flags] - HOST_ID
  return record_pack(r)
end

-- A record for a URL key the store has none of: every field at its default.
local function record_empty()
  local r = {}
  for i = 1, URLREC_COUNT do
    r[i] = 0
  end
  r[URLREC.version] = URLREC_VERSION
  r[URLREC.digest] = '\0\0\0\0'
  r[URLREC.simhash] = '\0\0\0\0\0\0\0\0'
  r.etag = ''
  r.tail = ''
  return r
end
