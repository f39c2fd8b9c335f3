-- Writes gathered into few commands: one command for many values (BITFIELD, LPUSH, HSET...).

-- A command sent once for many values: its head (command and fixed
-- arguments), then values pushed one, two or four at a time; it is sent when
-- it reaches CHUNK values (Lua 5.1 unpacks at most about 8000) and by `flush`.
local CHUNK = 4000

local function batch(...)
  local head = {...}
  return {head = head, args = {...}, n = #head, base = #head}
end

local function flush(b)
  if b.n > b.base then
    redis.call(unpack(b.args, 1, b.n))
    b.args = {unpack(b.head)}
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
