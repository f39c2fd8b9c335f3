-- Values as the scripts read and write them: whole numbers as decimal text, numbers read once per
-- call, a 64-bit key's decimal form. First of the library's prelude (crawler/crawlstate/library.py
-- PRELUDE): every function of the library may use what the prelude defines; a file may use the files
-- before it.

-- A whole number as decimal digits (times in ms, counts, bucket numbers, scores), as
-- string.format('%d') writes it; a fraction is rounded (half up). Lua numbers are doubles:
-- tostring, `..` and '%.0f' format them as floats (glibc's slow path), and string.format('%d') is
-- a C function call that parses its format; this takes groups of three digits from tables (DIGITS3,
-- DIGITS3_PAD) with arithmetic alone (exact below 2^53), into one concatenation: 0.7% fewer of
-- Redis' instructions per page (benchmarks/redis_cost.py, 2026-12-07).
local function fmt(n)
  n = n + 0  -- (a numeric text too, as string.format takes it)
  if n % 1 ~= 0 then
    n = math.floor(n + 0.5)
  end
  if n < 0 then
    return '-' .. fmt(-n)
  elseif n < 1000 then
    return DIGITS3[n]
  elseif not (n < 1e15) then  -- (and NaN)
    return string.format('%d', n)
  end
  local g1 = n % 1000
  n = (n - g1) / 1000
  if n < 1000 then
    return DIGITS3[n] .. DIGITS3_PAD[g1]
  end
  local g2 = n % 1000
  n = (n - g2) / 1000
  if n < 1000 then
    return DIGITS3[n] .. DIGITS3_PAD[g2] .. DIGITS3_PAD[g1]
  end
  local g3 = n % 1000
  n = (n - g3) / 1000
  if n < 1000 then
    return DIGITS3[n] .. DIGITS3_PAD[g3] .. DIGITS3_PAD[g2] .. DIGITS3_PAD[g1]
  end
  local g4 = n % 1000
  n = (n - g4) / 1000
  return DIGITS3[n] .. DIGITS3_PAD[g4] .. DIGITS3_PAD[g3] .. DIGITS3_PAD[g2] .. DIGITS3_PAD[g1]
end

-- A numeric text read where it surely is one (a number the worker or Redis wrote) is read as
-- `text + 0`: Lua reads it with one strtod, where tonumber reads it twice (and answers nil for a text
-- that is not a number, where `+ 0` raises).

-- A number given as text (a script's argument), read once per call: Redis' Lua reads a number
-- from text with strtod, twice in a tonumber, and the calls of a `_many` function's run
-- (crawler/crawlstate/schema.py _LIBRARY_MANY) repeat the same settings. Every function of the library
-- starts with a new table (library locals outlive a call): at most one entry per argument.
local NUMBERS = {}

local function num(text)
  local n = NUMBERS[text]
  if not n then
    n = tonumber(text)
    NUMBERS[text] = n
  end
  return n
end

-- A small whole number's decimal digits (a level, a block): a table lookup below 256
-- (BYTE_DECIMAL, crawler/crawlstate/schema.py), where string.format is a C function call, about 2,000 of
-- Redis' instructions.
local function small_decimal(n)
  return BYTE_DECIMAL[n] or fmt(n)
end

-- The decimal form of a signed 64-bit big-endian integer given as 8 bytes
-- (a URL key as the duplicate index stores it), exactly: 16-bit limbs.
local function int64_decimal(b)
  local limbs = {}
  for i = 0, 3 do
    limbs[i + 1] = string.byte(b, 2 * i + 1) * 256 + string.byte(b, 2 * i + 2)
  end
  local negative = limbs[1] >= 32768
  if negative then
    local carry = 1
    for i = 4, 1, -1 do
      local v = 65535 - limbs[i] + carry
      limbs[i] = v % 65536
      carry = math.floor(v / 65536)
    end
  end
  local groups = {}
  repeat
    local rem, zero = 0, true
    for i = 1, 4 do
      local cur = rem * 65536 + limbs[i]
      limbs[i] = math.floor(cur / 10000)
      rem = cur % 10000
      if limbs[i] ~= 0 then
        zero = false
      end
    end
    table.insert(groups, 1, rem)
  until zero
  local out = tostring(groups[1])
  for i = 2, #groups do
    out = out .. string.format('%04d', groups[i])
  end
  if negative then
    out = '-' .. out
  end
  return out
end
