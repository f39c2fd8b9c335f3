-- The next visit of a fetched URL, decided where its record is written (lua/urlmeta.lua), so that
-- the record and the recrawl schedule are written once per fetch. This is the Lua form of
-- crawler/policy/recrawl.py plan_revisit with crawler/policy/priority.py PriorityPolicy: the policy
-- stays Python's (its settings, its reference implementation); its numbers come here as one text
-- (revisit_terms in crawler/policy/recrawl.py) and tests/test_policy_lua_e2e.py holds the two
-- implementations to the same answers.

-- The policy's numbers, read once per text (a run of calls repeats the same text). A bounded
-- memo: library locals outlive a call, and the library serves every crawl on the server.
local REVISIT_TERMS, REVISIT_TERMS_COUNT = {}, 0
local function revisit_terms(text)
  local terms = REVISIT_TERMS[text]
  if terms then
    return terms
  end
  local v = {}
  for field in string.gmatch(text, '[^ ]+') do
    v[#v + 1] = tonumber(field)
  end
  if #v ~= 16 then
    error('revisit terms: 16 numbers expected, got ' .. #v)
  end
  terms = {
    min_interval = v[1], max_interval = v[2], initial_interval = v[3], change_fraction = v[4],
    importance_boost = v[5], w_inlinks = v[6], w_depth = v[7], w_host_importance = v[8],
    w_host_error_rate = v[9], w_host_near_dup_rate = v[10], w_change_rate = v[11],
    minimum = v[12], maximum = v[13], min_host_pages = v[14], default_level = v[15], levels = v[16],
  }
  if REVISIT_TERMS_COUNT >= 8 then
    REVISIT_TERMS, REVISIT_TERMS_COUNT = {}, 0
  end
  REVISIT_TERMS[text], REVISIT_TERMS_COUNT = terms, REVISIT_TERMS_COUNT + 1
  return terms
end

-- math.log(2) (a library is loaded without its math table: no call at load time).
local LOG2 = 0.6931471805599453

-- Python's round(): half to even.
local function round_even(x)
  local f = x - x % 1  -- (floor: math.floor is a C function call)
  local d = x - f
  if d > 0.5 or (d == 0.5 and f % 2 == 1) then
    return f + 1
  end
  return f
end

-- math.min(high, math.max(low, x)) to the last case (NaN gives low, as Python's min and max do),
-- without its two C function calls.
local function clamp(x, low, high)
  local v = low
  if x > low then
    v = x
  end
  if v < high then
    return v
  end
  return high
end

-- Due time (crawl-clock seconds, whole) and front-queue level of a URL's next visit, from its
-- history after this fetch (observations, changes, first observation, this fetch `now`, the fetch
-- before it: 0 if none), its depth and in-link estimate, its host's importance (0..1) and counters
-- (pages, errors, near duplicates). Same steps, same order of operations as plan_revisit. Third,
-- the due time's fraction of a second (the recrawl schedule orders a second's entries by it).
local function revisit_plan(t, observations, changes, first, now, previous, depth, inlinks, importance_of_host,
                            pages, errors, near)
  local rate = nil
  if observations >= 2 and now > first then
    local n = observations - 1
    local interval = (now - first) / n
    local x = math.min(changes, n)
    rate = -math.log((n - x + 0.5) / (n + 0.5)) / interval
  end
  local error_rate, near_rate = 0.0, 0.0
  if pages >= t.min_host_pages then
    error_rate, near_rate = errors / pages, near / pages
  end
  local score = t.w_inlinks * (math.log(1 + math.max(inlinks, 0)) / LOG2) + t.w_depth * depth
      + t.w_host_importance * importance_of_host + t.w_host_error_rate * error_rate
      + t.w_host_near_dup_rate * near_rate
  if rate then
    score = score + t.w_change_rate * (math.log(1 + math.max(rate * 86400.0, 0.0)) / LOG2)
  end
  local importance = 0.0
  if t.maximum > 0 then
    importance = clamp(score / t.maximum, 0.0, 1.0)
  end
  local boost = 1.0 + t.importance_boost * clamp(importance, 0.0, 1.0)
  local interval
  if rate == nil or changes == 0 then
    local base = t.initial_interval
    if previous > 0 and now - previous ~= 0 then
      base = (now - previous) * 2
    end
    interval = clamp(base / boost, t.min_interval, t.max_interval)
  else
    interval = clamp(t.change_fraction / rate / boost, t.min_interval, t.max_interval)
  end
  local priority = clamp(round_even(score), t.minimum, t.maximum)
  local level = clamp(t.default_level - priority, 0, t.levels - 1)
  local due = now + interval
  local whole = due - due % 1
  return whole, level, due - whole
end
