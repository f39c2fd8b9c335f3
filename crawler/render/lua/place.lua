#!lua
-- A host's render mark, placed unless an operator's mark holds it (crawler/render/marks.py).
-- KEYS[1]: the crawl's render marks (hash); ARGV[1]: the host; ARGV[2]: the mark to place;
-- ARGV[3..]: the stored values of an operator's marks. Returns the value in force.
local current = redis.call('HGET', KEYS[1], ARGV[1])
for i = 3, #ARGV do
  if current == ARGV[i] then
    return current
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return ARGV[2]
