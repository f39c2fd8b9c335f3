"""The crawl's Lua composed from its files: the schema written in, the prelude's helpers, the scripts.

The prelude (:data:`PRELUDE`) is the helpers every function of the library may use, one file per
concern (values, gathered writes, linear hashing, URL records, the recrawl schedule: this package's
``lua/``; the frontier's hosts; the recrawl policy; a URL's fetch history; the near-duplicate index), each
using only those before it.
:func:`compose_library` makes the crawl's function library of every script
(:data:`LIBRARY_SCRIPTS`), which the Redis connection loads (``redisconn/functions.py``); :func:`compose` one script
(``EVAL``) for tests and operators. Names of the schema (:mod:`crawler.crawlstate.schema`) and of the
step protocol (:mod:`crawler.crawlstate.protocol`) are written in as literals.
"""

from __future__ import annotations

import re
from importlib import resources

from crawler.crawlstate import schema
from crawler.crawlstate.protocol import STEP_MESSAGES
from crawler.crawlstate.schema import (
    RECORD_FIELDS,
    RECORD_FLAGS,
    RECORD_LUA_FORMAT,
    RECORD_VERSION,
    SHARD_KEYS,
    UrlState,
)


def _lua_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _tables() -> dict[str, dict[str, str]]:
    """Each schema table's names and their Lua literals: the key schema, the URL record's layout, the
    step protocol's argument positions (:mod:`crawler.crawlstate.protocol`)."""
    tables = {
        "K": {name: _lua_string(key.suffix) for name, key in SHARD_KEYS.items()},
        "URLREC": {field: str(index) for index, field in enumerate(RECORD_FIELDS, start=1)},
        "URLREC_FLAG": {name: str(getattr(schema, name)) for name in RECORD_FLAGS},
        "URL_STATE": {state.name: str(int(state)) for state in UrlState},
    }
    for message in STEP_MESSAGES.values():
        tables.update(message.lua_tables())
    return tables


def _constants() -> dict[str, str]:
    return {
        "URLREC_FORMAT": _lua_string(RECORD_LUA_FORMAT),
        "URLREC_COUNT": str(len(RECORD_FIELDS)),
        "URLREC_VERSION": str(RECORD_VERSION),
        "DUE_STEPS": str(schema.DUE_STEPS),
        "ZSET_ANCHOR": _lua_string(schema.ZSET_ANCHOR),
        # A byte's decimal digits (BYTE_DECIMAL[200] is '200'): a table lookup, where string.format
        # is a C function call, about 2,000 of Redis' instructions each.
        "BYTE_DECIMAL": "{[0] = '0', " + ", ".join(f"'{n}'" for n in range(1, 256)) + "}",
        # The digits of 0 .. 999, and the same padded to three: fmt (values.lua) writes a whole number
        # by groups of three from these tables.
        "DIGITS3": "{[0] = '0', " + ", ".join(f"'{n}'" for n in range(1, 1000)) + "}",
        "DIGITS3_PAD": "{[0] = '000', " + ", ".join(f"'{n:03d}'" for n in range(1, 1000)) + "}",
    }


_ENTRY = re.compile(r"(?<!\w)(?<![^.]\.)(" + "|".join(sorted(_tables(), key=len, reverse=True))
                    + r")\.([A-Za-z_][A-Za-z_0-9]*)")
_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_COMMENT = re.compile(r"--[^\n]*")
_TOP_LEVEL = re.compile(r"^local (?:function )?([A-Za-z_][A-Za-z_0-9]*)")


def _with_literals(source: str, tables: dict[str, dict[str, str]]) -> str:
    """``K.ready`` -> ``'ready'``, ``URLREC.flags`` -> ``17``...: a script builds no schema table
    when it runs (Redis runs a script's whole text on every call). An unknown name is an error."""
    def literal(match: re.Match[str]) -> str:
        table, name = match.groups()
        if name not in tables[table]:
            raise ValueError(f"Lua: {table}.{name} is not in the schema (crawler/crawlstate/schema.py)")
        return tables[table][name]

    return _ENTRY.sub(literal, source)


def _definitions(helpers: str) -> list[tuple[str, str]]:
    """The prelude (:data:`PRELUDE`'s files) cut into its top-level definitions (``local
    function f`` or ``local X =`` at the start of a line, with the comments above it), each with its
    name, in order."""
    parts: list[tuple[str, list[str]]] = []
    current: list[str] = []
    for line in helpers.split("\n"):
        top = _TOP_LEVEL.match(line)
        if top:
            lead: list[str] = []
            while current and (current[-1].startswith("--") or not current[-1].strip()):
                lead.insert(0, current.pop())
            current = [*lead, line]
            parts.append((top.group(1), current))
        else:
            current.append(line)
    return [(name, "\n".join(lines)) for name, lines in parts]


def _words(code: str) -> set[str]:
    """The names Lua code uses (its comments left out)."""
    return set(_WORD.findall(_COMMENT.sub("", code)))


def compose(shebang: str, body: str, *, common: bool = True) -> str:
    """Lua code as one script (``EVAL``): ``shebang``, the schema entries it names as literals, the
    shared helpers of the prelude (:data:`PRELUDE`) it uses
    (directly or through another helper; none unless ``common``), then ``body``. The crawl calls its library's functions
    (:func:`compose_library`); a single script is how tests and an operator's ``redis-cli --eval``
    try a helper on a server."""
    tables = _tables()
    body = _with_literals(body, tables)
    helpers = _definitions(_with_literals(prelude_text(), tables)) if common else []
    wanted, chosen = _chosen(helpers, _words(body))
    prelude = [f"local {table} = {{{', '.join(f'{name} = {value}' for name, value in entries.items())}}}"
               for table, entries in tables.items() if table in wanted]
    prelude += [f"local {name} = {value}" for name, value in _constants().items() if name in wanted]
    return "\n".join([shebang, *prelude, *chosen, body])


def _chosen(helpers: list[tuple[str, str]], wanted: set[str]) -> tuple[set[str], list[str]]:
    """The helpers that code using the names ``wanted`` needs (directly or through another helper), in
    their order, and every name they and the code use."""
    wanted = set(wanted)
    chosen: list[str] = []
    for name, text in reversed(helpers):  # a helper only uses those defined above it
        if name in wanted:
            chosen.append(text)
            wanted |= _words(text)
    chosen.reverse()
    return wanted, chosen


# -- the scripts as one function library (Redis 7 functions) ----------------------------------

#: Every script of the crawl, by package (``lua/<name>.lua``): the function library's functions.
LIBRARY_SCRIPTS: dict[str, tuple[str, ...]] = {
    "crawler.frontier": ("enqueue", "claim", "ack", "release", "revive", "drain", "touch", "schedule", "backlog"),
    "crawler.metadata": ("urlmeta", "record"),
    "crawler.dedup": ("dedup",),
    "crawler.ops": ("lead",),
    "crawler.render": ("place",),
}
#: Scripts with a ``_many`` function besides their own (:data:`_LIBRARY_MANY`).
LIBRARY_MANY = ("dedup", "urlmeta", "schedule")
#: The library's name in Redis (``FUNCTION LIST``) and its functions' prefix.
LIBRARY_NAME = "crawler"

#: The ``_many`` function of a script: the calls of one script with the same keys packed in ARGV (each
#: call's argument count, then its arguments; a count is read as a number once a run: calls of one
#: script repeat it), each run by the script's own function in turn. The reply is the calls' replies in
#: order, an error reply in place of a call that raised one (its writes before the error stay, as they
#: would in a call of its own). Linear-hashing states (lhash.lua, LH_RUN) and the recrawl schedule's
#: bucket sizes and counts (due.lua, DUE_RUN) stay open for the run and are saved at its end. Item
#: pipelines send their calls of one event-loop turn this way (``BatchedScripts``, ``redisconn/batch.py``).
_LIBRARY_MANY = """
local function {name}_many(KEYS, ARGV)
  call_start(true)
  local replies, counts, at, total = {{}}, {{}}, 1, #ARGV
  while at <= total do
    BATCHES_OPEN = 0
    local n = counts[ARGV[at]]
    if not n then
      n = tonumber(ARGV[at])
      counts[ARGV[at]] = n
    end
    local ok, reply = pcall(s_{name}, KEYS, {{unpack(ARGV, at + 1, at + n)}})
    if not ok then
      reply = type(reply) == 'table' and reply.err and reply or {{err = tostring(reply)}}
    elseif reply == nil then
      reply = false
    end
    replies[#replies + 1] = reply
    at = at + n + 1
  end
  run_end()
  return replies
end"""

#: A call's start and a ``_many`` run's end, once for every function of the library: the globals bound
#: at the first call (``bind_globals``), what a call keeps for itself emptied (library locals outlive
#: it); in a run (``run``), the linear-hashing states and the recrawl schedule's sizes and counts stay
#: open until ``run_end`` writes them.
_CALLS = """
local function call_start(run)
  if not redis then bind_globals() end
  NUMBERS, BATCHES_OPEN = {}, 0
  if run then
    LH_RUN, DUE_RUN = {}, {counts = {}, sizes = {}, found = {}}
  else
    LH_RUN, DUE_RUN = false, false
  end
end

local function run_end()
  lh_flush()
  due_flush()
  LH_RUN, DUE_RUN = false, false
end"""


#: The globals the functions use, as locals of the library: a global is read through the metatable of
#: the functions' environment (a miss in it, then the real table), a library local is an upvalue. A
#: library is loaded where none of them exists, so they are bound at a function's first call
#: (``bind_globals``; ``runtime_globals`` is defined before the locals, so its names are the globals).
#: Registration keeps its own name, taken while the library loads.
RUNTIME_GLOBALS = ("redis", "string", "math", "table", "struct", "bit", "tonumber", "tostring", "type", "unpack",
                   "pcall", "ipairs", "pairs", "error", "select")
_BIND_GLOBALS = f"""local register_function = redis.register_function
local function runtime_globals() return {', '.join(RUNTIME_GLOBALS)} end
local {', '.join(RUNTIME_GLOBALS)}
local function bind_globals() {', '.join(RUNTIME_GLOBALS)} = runtime_globals() end"""


def lua_text(package: str, name: str) -> str:
    """The text of ``lua/<name>.lua`` of ``package`` (package data: it works from a wheel or an egg)."""
    return (resources.files(package) / "lua" / f"{name}.lua").read_text(encoding="utf-8")


#: The helpers every function of the library may use, in order (a file may use those before it).
PRELUDE: tuple[tuple[str, str], ...] = (
    ("crawler.crawlstate", "values"), ("crawler.crawlstate", "writes"), ("crawler.crawlstate", "lhash"),
    ("crawler.crawlstate", "records"), ("crawler.crawlstate", "due"), ("crawler.frontier", "hosts"),
    ("crawler.policy", "revisit"), ("crawler.metadata", "history"), ("crawler.dedup", "near"),
)


def prelude_text() -> str:
    """The helpers' files (:data:`PRELUDE`) as one text."""
    return "\n".join(lua_text(package, name) for package, name in PRELUDE)


def library_scripts() -> dict[str, str]:
    """Every script of the crawl's library (:data:`LIBRARY_SCRIPTS`), name -> text."""
    return {name: lua_text(package, name) for package, names in LIBRARY_SCRIPTS.items() for name in names}


def function_name(script: str, *, many: bool = False, library: str = LIBRARY_NAME) -> str:
    """The library function that runs ``script`` (``enqueue`` -> ``crawler_enqueue``)."""
    return f"{library}_{script}_many" if many else f"{library}_{script}"


def compose_library(library: str, scripts: dict[str, str], many: tuple[str, ...], version: str, *,
                    common: bool = True) -> str:
    """Scripts (name -> text, each starting with its ``#!lua`` line) as one Redis function library
    (``FUNCTION LOAD``): the schema tables and the shared helpers of the prelude (:data:`PRELUDE`; unless
    ``common`` is false) defined once, when the library loads, where a script (``EVAL``) runs its whole text,
    helper definitions included, on every call. Each script's body becomes a function of (KEYS, ARGV)
    registered as :func:`function_name` with the flags of its ``#!lua`` line (none: may write, refused
    before it starts while Redis is over ``maxmemory``); those named in ``many`` get a ``_many``
    function too (:data:`_LIBRARY_MANY`); ``<library>_version`` (no writes) answers ``version``.

    What a script keeps for one run (``NUMBERS`` in values.lua, ``LH_RUN`` in lhash.lua, ``DUE_RUN`` in due.lua,
    ``BATCHES_OPEN`` in writes.lua) is reset at each call: library locals outlive the call."""
    tables = _tables()
    parts = [f"#!lua name={library}", _BIND_GLOBALS]
    if common:
        parts += [f"local {table} = {{{', '.join(f'{name} = {value}' for name, value in entries.items())}}}"
                  for table, entries in tables.items()]
        parts += [f"local {name} = {value}" for name, value in _constants().items()]
        parts.append(_with_literals(prelude_text(), tables))
    else:
        parts.append("local NUMBERS, LH_RUN, DUE_RUN, BATCHES_OPEN = {}, false, false, 0\n"
                     "local function lh_flush() end\nlocal function due_flush() end")
    parts.append(_CALLS)
    registered: list[str] = []
    for name, script in scripts.items():
        shebang, _, body = script.partition("\n")
        flags = _flags(shebang, f"{library} script {name}")
        parts.append(f"local function s_{name}(KEYS, ARGV)\n{_with_literals(body, tables)}\nend")
        registered.append(_register(function_name(name, library=library),
                                    f"function(KEYS, ARGV) call_start(false) return s_{name}(KEYS, ARGV) end",
                                    flags))
        if name in many:
            parts.append(_LIBRARY_MANY.format(name=name))
            registered.append(_register(function_name(name, many=True, library=library), f"{name}_many", flags))
    registered.append(_register(f"{library}_version", f"function() return {_lua_string(version)} end",
                                ("no-writes",)))
    return "\n".join([*parts, *registered]) + "\n"


def _flags(shebang: str, where: str) -> tuple[str, ...]:
    if not shebang.startswith("#!lua"):
        raise ValueError(f"{where} must start with a #!lua line (its flags)")
    match = re.search(r"flags=(\S+)", shebang)
    return tuple(match.group(1).split(",")) if match else ()


def _register(name: str, callback: str, flags: tuple[str, ...]) -> str:
    listed = ", ".join(_lua_string(flag) for flag in flags)
    return f"register_function{{function_name = '{name}', callback = {callback}, flags = {{{listed}}}}}"
