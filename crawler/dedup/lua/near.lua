-- The near-duplicate index's helpers (lua/dedup.lua), defined once in the library: a helper
-- defined inside a script's body is a closure made again at every call, which Redis' Lua
-- allocates and collects (a page's eight closures and their upvalues were a tenth of its
-- duplicate check).

-- The hash and field of block i of a SimHash whose two bytes are high and low (decimal bytes from
-- a table, not string.format: a C function call costs Redis' Lua as much as dozens of lines of
-- arithmetic).
local function near_slot(P, i, high, low)
  local field = low % 16
  return P .. K.near .. BYTE_DECIMAL[i] .. ':' .. BYTE_DECIMAL[high] .. ':' .. BYTE_DECIMAL[(low - field) / 16],
         BYTE_DECIMAL[field]
end

-- A SimHash without block i (6 bytes).
local function near_outside(h, i)
  if i == 0 then
    return string.sub(h, 3, 8)
  elseif i == 3 then
    return string.sub(h, 1, 6)
  end
  return string.sub(h, 1, 2 * i) .. string.sub(h, 2 * i + 3, 8)
end

-- A SimHash whole again: the 6 bytes outside block i, and the block from `simhash`.
local function near_whole(simhash, rest, i)
  return string.sub(rest, 1, 2 * i) .. string.sub(simhash, 2 * i + 1, 2 * i + 2) .. string.sub(rest, 2 * i + 1, 6)
end

-- The reference filed with a SimHash under its block 0 (when that is in this shard), or nil.
local function near_reference(P, h)
  local entries = redis.call('HGET', near_slot(P, 0, string.byte(h, 1, 2))) or ''
  local rest = near_outside(h, 0)
  for j = 1, #entries, 16 do
    if string.sub(entries, j, j + 5) == rest then
      return string.sub(entries, j + 6, j + 15)
    end
  end
  return nil
end

-- Bits set in a 24-bit number (SWAR: no loop, no table).
local function bits24(x)
  x = x - bit.band(bit.rshift(x, 1), 0x555555)
  x = bit.band(x, 0x333333) + bit.band(bit.rshift(x, 2), 0x333333)
  x = bit.band(x + bit.rshift(x, 4), 0x0F0F0F)
  return bit.band(x, 0xFF) + bit.band(bit.rshift(x, 8), 0xFF) + bit.rshift(x, 16)
end
