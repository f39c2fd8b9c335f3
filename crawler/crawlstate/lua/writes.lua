-- Writes gathered into few commands: one command for many values (BITFIELD, LPUSH, HSET...).

-- A command sent once for many values: its head (command and fixed
-- arguments), then values pushed one, two or four at a time; it is sent when
-- it reaches CHUNK values (Lua 5.1 unpacks at most about 8000) and by `flush`.
local CHUNK = 4000

-- The buffers of the batches a call opens, kept for the next calls (BATCHES_OPEN is set to 0 as a
-- function starts, and before each call of a `_many` run): a new table that grows to CHUNK values
-- is rehashed a dozen times on the way and left to the garbage collector. The first BATCHES_KEPT
-- batches of a call reuse a kept buffer; more get a table of their own. A kept buffer holds at most
-- CHUNK values of its last use.
local BATCHES, BATCHES_OPEN, BATCHES_KEPT = {}, 0, 8

local function batch(...)
  local b
  if BATCHES_OPEN < BATCHES_KEPT then
    BATCHES_OPEN = BATCHES_OPEN + 1
    b = BATCHES[BATCHES_OPEN]
    if not b then
      b = {args = {}}
      BATCHES[BATCHES_OPEN] = b
    end
  else
    b = {args = {}}
  end
  local args, n = b.args, select('#', ...)
  for i = 1, n do
    args[i] = (select(i, ...))
  end
  b.n, b.base = n, n
  return b
end

-- Sends the values pushed since the last flush, after the head (which stays in args[1 .. base]).
local function flush(b)
  if b.n > b.base then
    redis.call(unpack(b.args, 1, b.n))
    b.n = b.base
  end
end

local function push1(b, x)
  local n = b.n + 1
  b.args[n] = x
  b.n = n
  if n >= CHUNK then
    flush(b)
  end
end

local function push2(b, x, y)
  local args, n = b.args, b.n
  args[n + 1] = x
  args[n + 2] = y
  b.n = n + 2
  if b.n >= CHUNK then
    flush(b)
  end
end

local function push4(b, w, x, y, z)
  local args, n = b.args, b.n
  args[n + 1] = w
  args[n + 2] = x
  args[n + 3] = y
  args[n + 4] = z
  b.n = n + 4
  if b.n >= CHUNK then
    flush(b)
  end
end
