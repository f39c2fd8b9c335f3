#!lua flags=no-writes
-- URLs waiting in the back queues of some hosts (every level), one count per host.
-- KEYS[1]: the shard's set of hosts owning a back queue (anchors the script to the shard's slot)
-- ARGV[1]: P; ARGV[2]: priority levels; then host names.
-- One call reads a batch of hosts (the operator's views and the crawl report), instead of a command per
-- host and level sent and parsed by the client.
local P, levels = ARGV[1], tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV do
  local n = 0
  for level = 0, levels - 1 do
    n = n + redis.call('LLEN', back_key(P, ARGV[i], level))
  end
  out[#out + 1] = n
end
return out
