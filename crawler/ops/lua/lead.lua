#!lua
-- A role one worker of a crawl holds at a time under a short lease (exporting the crawl-wide
-- metrics, so that a fleet's sum of them is the crawl's figure): the holder renews it, another
-- worker takes it once it has lapsed (its holder stopped or died), the holder gives it up at close.
-- KEYS[1]: the role's key; ARGV[1]: this worker; ARGV[2]: the lease (ms), 0 to give it up.
-- Returns 1 if this worker holds the role now, else 0.
local holder = redis.call('GET', KEYS[1])
if ARGV[2] == '0' then
  if holder == ARGV[1] then
    redis.call('DEL', KEYS[1])
  end
  return 0
end
if holder == ARGV[1] or not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
