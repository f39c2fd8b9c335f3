"""The Redis schema the Lua scripts share with Python, and the scripts as they are loaded.

One source for each fact, here: the keys of a frontier shard
(:data:`SHARD_KEYS`, the duplicate index's among them; :class:`crawler.frontier.keys.FrontierKeys`
builds them) and the layout of a URL record (:data:`RECORD_STRUCT`;
:mod:`crawler.metadata.record` packs it). Nothing here imports what it describes.
:func:`compose` writes them into each script as it is loaded (as literals:
``K.ready`` becomes ``'ready'``; a table named on its own is defined whole):

* ``K.<name>``: a frontier shard key's suffix (``P .. K.ready``; a family,
  ending in ``:``, takes its member after it: ``P .. K.queue .. host``);
* ``URLREC.<field>``: a field's position in a URL record's head (1-based, as
  Lua counts; ``URLREC_FORMAT`` its ``struct`` format, ``URLREC_COUNT`` its
  fields), ``URLREC_FLAG.<NAME>`` the bits of its flags, ``URL_STATE.<STATE>``
  the values of its state field.

No script writes a key name or a record position of its own: the contract
tests check that every ``K.``/``URLREC.`` name a script uses exists here, that
no script builds a key from a string literal, and that every key a crawl
leaves in Redis matches the schema.
"""

from __future__ import annotations

import re
import struct
from enum import IntEnum
from importlib import resources
from typing import NamedTuple

# -- the keys of a frontier shard (crawler.frontier.keys builds them) ---------------------


class ShardKey(NamedTuple):
    """One key (or, with a trailing ``:``, one family of keys) of a frontier shard."""

    suffix: str
    kind: str
    meaning: str
    #: What the key's size grows with: "page" (crawled pages or seen URLs), "queued" (URLs waiting),
    #: "host", "fixed" (sized once for the crawl), "crawl" (small or bounded).
    grows: str = "crawl"
    #: A hash read or written by field on a page's path, with up to one field per host or request in
    #: flight: kept as a hash table from the start (:data:`TABLE_FIELD`), never a listpack, which Redis
    #: scans from its start at every lookup (a few hundred hosts in one: a sixth of Redis' instructions).
    table: bool = False


#: The field that keeps a ``table`` hash a hash table: its value is longer than the server keeps in a
#: listpack (``hash-max-listpack-value``), written by every worker as it opens a shard. No host, lease
#: number or counter name is empty; readers of a whole hash skip it.
TABLE_FIELD = b""


#: The Lua name -> key of every key of a frontier shard (prefix ``frontier:{<shard tag>}:``).
SHARD_KEYS: dict[str, ShardKey] = {
    "bloom": ShardKey("seen:bloom", "string", "bitmap of the seen set's Bloom filter", "fixed"),
    "seen_exact": ShardKey("seen:x:", "set", "<bucket>: 64-bit URL keys (intset), one bucket of the exact seen "
                           "store (linear hashing, state lh:seen)", "page"),
    "seen_count": ShardKey("seencount", "string", "URLs ever added to the seen set"),
    "lh": ShardKey("lh:", "string",
                   "<structure>: level, split pointer, entries of a linear-hashing structure (struct '>BI4I8')"),
    "host_pages": ShardKey("budget:host", "hash", "host -> URLs enqueued (the per-host page budget)", "host",
                           table=True),
    "domain_pages": ShardKey("budget:domain", "hash", "registered domain -> URLs enqueued", "host", table=True),
    "front": ShardKey("front:", "list", "<level>: \"<host> <entry>\" of one priority level (hosts without a "
                      "back queue)", "queued"),
    "selector": ShardKey("sel", "string", "the biased selector's round-robin counter"),
    "queue": ShardKey("q:", "list", "<host>:<level>: the host's back queue of one level, entries (oldest at "
                      "the right)", "queued"),
    "active": ShardKey("active", "set", "hosts that own a back queue (ready, in flight or asleep)", "host"),
    "ready": ShardKey("ready", "zset", "awake host -> earliest time (ms) it may be contacted", "host"),
    "sleeping": ShardKey("sleep", "zset", "host that keeps its back queue -> wake time (ms)", "host"),
    "parked": ShardKey("parked", "set", "sleeping hosts parked after connection failures", "host"),
    "cool": ShardKey("cool", "zset", "host without a back queue -> next allowed time (ms)", "host"),
    "leases": ShardKey("leases", "zset", "lease member -> expiry (ms)"),
    "leased": ShardKey("leased", "hash", "lease number -> the entry it holds (in flight only)", table=True),
    "holders": ShardKey("holders", "hash", "worker -> \"<ms> <lease number>...\": the leases it held at its last "
                        "renewal (for scrapy frontier url; one field per worker process)"),
    "lease_sequence": ShardKey("leaseseq", "string", "the last lease (and dead letter) number given"),
    "queued": ShardKey("queued", "string", "requests in front and back queues (not leased)"),
    "host_delay": ShardKey("hostdelay", "hash", "host -> minimum delay (ms) from robots.txt Crawl-delay", "host"),
    "host_throttle": ShardKey("hostthrottle", "hash", "host -> throttle level (429/503 in a row)", "host"),
    "host_failures": ShardKey("hostfail", "hash", "host -> consecutive connection-level failures", "host"),
    "host_robots": ShardKey("robots", "hash", "host -> time (ms) until which its robots.txt decision stands",
                            "host", table=True),
    "robots_record": ShardKey("robots:", "string", "<origin>: the shared robots.txt record of an origin", "host"),
    "sitemaps": ShardKey("sitemaps:", "set", "<host>: sitemap URLs robots.txt lists", "host"),
    "slots": ShardKey("slots", "hash", "host -> \"<in flight> <spacing ms> <last start ms> <hold ms> <slot free "
                      "ms>...\" (only for keys with several requests in flight)", "host", table=True),
    "slot_limit": ShardKey("slotk", "hash", "politeness key -> its requests in flight at most (DOWNLOAD_SLOTS "
                           "concurrency)", "host"),
    "group": ShardKey("group", "hash", "host -> its politeness group (domain or address)", "host", table=True),
    "group_next": ShardKey("gnext", "hash", "politeness group -> next allowed time (ms)", "host", table=True),
    "group_busy": ShardKey("gbusy", "hash", "politeness group -> its host in flight (with "
                           "FRONTIER_CONCURRENCY_PER_KEY > 1: its requests in flight)", "host"),
    "group_wait": ShardKey("gwait:", "zset", "<group>: ready hosts waiting for their group, by time", "host"),
    "dead": ShardKey("dead", "hash", "dead letter number -> its request", "page"),
    "dead_info": ShardKey("deadinfo", "hash", "dead letter number -> \"host\\tlevel\\ttime\\terror\\tmessage\"",
                          "page"),
    "due": ShardKey("due", "zset", "bucket number -> lowest due time (crawl-clock s) it holds: the index of the "
                    "recrawl schedule", "page"),
    "due_bucket": ShardKey("due:", "zset", "<bucket>: URL key -> due time (crawl-clock s), one bucket of the "
                           "recrawl schedule", "page"),
    "due_sequence": ShardKey("dueseq", "string", "the last due bucket number given"),
    "due_count": ShardKey("duecount", "string", "URLs in the recrawl schedule"),
    "inlinks": ShardKey("inlinks", "string", "8-bit counters: the in-link sketch", "fixed"),
    "host_quality": ShardKey("hostq", "hash", "\"<host>|n\", \"|e\", \"|d\" -> pages, errors, near duplicates",
                             "host", table=True),
    "urls": ShardKey("url:", "hash", "<bucket>: URL key -> URL record (crawler/metadata/record.py), one bucket "
                     "(linear hashing, state lh:url)", "page"),
    "digests": ShardKey("dx:", "hash", "<bucket>: payload digest key -> first capture, one bucket of the exact "
                        "duplicate index (linear hashing, state lh:dx)", "page"),
    "near": ShardKey("nd:", "hash", "<block>:<high byte>: low byte -> SimHashes with that 16-bit block (the "
                     "near-duplicate index)", "page"),
    "host_ids": ShardKey("hostid", "hash", "host -> its number in the shard's URL records", "host", table=True),
    "host_names": ShardKey("hostname", "hash", "host number -> host", "host", table=True),
    "host_sequence": ShardKey("hostseq", "string", "the last host number given"),
}

#: Keys of the whole crawl, outside any shard (prefix ``frontier:{<crawl>}:``).
CRAWL_KEYS: dict[str, ShardKey] = {
    "meta": ShardKey("meta", "hash", "the crawl's fixed facts: layout, normalization version, shards, politeness "
                     "key, seen set and sketch sizes"),
    "draining": ShardKey("draining", "string", "set while the crawl drains (scrapy frontier drain)"),
    "totals": ShardKey("totals", "hash", "every worker's counters, summed"),
    "timeline": ShardKey("timeline", "list", "progress samples (msgpack), the newest 100,000"),
    "workers": ShardKey("workers", "zset", "worker -> when it last reported"),
    "render": ShardKey("render", "hash", "host or domain -> render mark: on / off (an operator's), "
                       "js:<until ms> / static:<until ms> (detected)", "host"),
    "metrics_leader": ShardKey("metricsleader", "string", "the worker exporting the crawl-wide metrics (a lease "
                               "of three METRICS_REFRESH_INTERVAL)"),
    "slot_conf": ShardKey("slotconf", "hash", "host or politeness key -> its DOWNLOAD_SLOTS entry (JSON: delay, "
                          "concurrency, randomize_delay), every worker's", "host"),
}


# -- the URL record's layout (crawler.metadata.record packs and reads it) ------------------

RECORD_VERSION = 2
#: The fixed head of a record, in :data:`RECORD_FIELDS` order.
RECORD_STRUCT = struct.Struct("<BBHIIIIQ4s8sIHHHBBBBB")
#: The same layout for the Lua ``struct`` library.
RECORD_LUA_FORMAT = "<BBHI4I4I4I4I8c4c8I4HHHBBBBB"
#: The head's fields, in order (``URLREC.<name>`` in the Lua prelude: positions from 1).
RECORD_FIELDS = (
    "version", "state", "status", "fetched_at", "first_fetch", "next_visit", "last_modified", "captured", "digest",
    "simhash", "length", "outlinks", "observations", "changes", "level", "depth", "flags", "etag_len", "host_len",
)
assert len(RECORD_FIELDS) == len(RECORD_STRUCT.unpack(bytes(RECORD_STRUCT.size)))

#: ``flags``: what the URL's callback is (two bits), then facts about the record.
KIND_PARSE = 0
KIND_SITEMAP = 1
KIND_OTHER = 2
KIND_MASK = 3
FLAG_HTTPS = 4
#: The host key is stored before the URL (it is not the start of the URL's authority).
FLAG_HOST_APART = 8
FLAG_DIGEST = 16
FLAG_SIMHASH = 32
#: The URL after its host is packed (:func:`pack_url_part`).
FLAG_PACKED = 64
#: In Redis, the host is the shard's 3-byte number for it (the scripts store records so, and hand
#: them out with the host's name: Python never sees one).
FLAG_HOST_ID = 128
#: The names of the flags above, as the scripts know them (``URLREC_FLAG.<NAME>``).
RECORD_FLAGS = ("KIND_PARSE", "KIND_SITEMAP", "KIND_OTHER", "KIND_MASK", "FLAG_HTTPS", "FLAG_HOST_APART",
                "FLAG_DIGEST", "FLAG_SIMHASH", "FLAG_PACKED", "FLAG_HOST_ID")

class UrlState(IntEnum):
    QUEUED = 0
    FETCHED = 1
    FAILED = 2
    DEAD = 3



# -- the scripts as loaded -------------------------------------------------------------------



def _lua_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _tables() -> dict[str, dict[str, str]]:
    """Each schema table's names and their Lua literals."""
    return {
        "K": {name: _lua_string(key.suffix) for name, key in SHARD_KEYS.items()},
        "URLREC": {field: str(index) for index, field in enumerate(RECORD_FIELDS, start=1)},
        "URLREC_FLAG": {name: str(globals()[name]) for name in RECORD_FLAGS},
        "URL_STATE": {state.name: str(int(state)) for state in UrlState},
    }


def _constants() -> dict[str, str]:
    return {
        "URLREC_FORMAT": _lua_string(RECORD_LUA_FORMAT),
        "URLREC_COUNT": str(len(RECORD_FIELDS)),
        "URLREC_VERSION": str(RECORD_VERSION),
        # A byte's decimal digits (BYTE_DECIMAL[200] is '200'): a table lookup, where string.format
        # is a C function call, about 2,000 of Redis' instructions each.
        "BYTE_DECIMAL": "{[0] = '0', " + ", ".join(f"'{n}'" for n in range(1, 256)) + "}",
    }


_ENTRY = re.compile(r"(?<!\w)(?<![^.]\.)(K|URLREC|URLREC_FLAG|URL_STATE)\.([A-Za-z_][A-Za-z_0-9]*)")
_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_COMMENT = re.compile(r"--[^\n]*")
_TOP_LEVEL = re.compile(r"^local (?:function )?([A-Za-z_][A-Za-z_0-9]*)")


def _with_literals(source: str, tables: dict[str, dict[str, str]]) -> str:
    """``K.ready`` -> ``'ready'``, ``URLREC.flags`` -> ``17``...: a script builds no schema table
    when it runs (Redis runs a script's whole text on every call). An unknown name is an error."""
    def literal(match: re.Match[str]) -> str:
        table, name = match.groups()
        if name not in tables[table]:
            raise ValueError(f"Lua: {table}.{name} is not in the schema (crawler/schema.py)")
        return tables[table][name]

    return _ENTRY.sub(literal, source)


def _definitions(helpers: str) -> list[tuple[str, str]]:
    """The prelude (common.lua and the files after it) cut into its top-level definitions (``local
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
    shared helpers of the prelude (:data:`PRELUDE`: ``crawler/frontier/lua/common.lua``...) it uses
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
#: would in a call of its own). Linear-hashing states stay open for the run (common.lua, LH_RUN) and are
#: saved at its end. Item pipelines send their calls of one event-loop turn this way
#: (:class:`crawler.redisconn.batch.BatchedScripts`).
_LIBRARY_MANY = """
local function {name}_many(KEYS, ARGV)
  NUMBERS, LH_RUN = {{}}, {{}}
  local replies, counts, at, total = {{}}, {{}}, 1, #ARGV
  while at <= total do
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
  lh_flush()
  LH_RUN = false
  return replies
end"""


def lua_text(package: str, name: str) -> str:
    """The text of ``lua/<name>.lua`` of ``package`` (package data: it works from a wheel or an egg)."""
    return (resources.files(package) / "lua" / f"{name}.lua").read_text(encoding="utf-8")


#: The helpers every function of the library may use, in order (a file may use those before it).
PRELUDE: tuple[tuple[str, str], ...] = (("crawler.frontier", "common"), ("crawler.policy", "revisit"))


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

    What a script keeps for one run (``NUMBERS``, ``LH_RUN`` in common.lua) is reset at each call:
    library locals outlive the call."""
    tables = _tables()
    parts = [f"#!lua name={library}"]
    if common:
        parts += [f"local {table} = {{{', '.join(f'{name} = {value}' for name, value in entries.items())}}}"
                  for table, entries in tables.items()]
        parts += [f"local {name} = {value}" for name, value in _constants().items()]
        parts.append(_with_literals(prelude_text(), tables))
    else:
        parts.append("local NUMBERS, LH_RUN = {}, false\nlocal function lh_flush() end")
    registered: list[str] = []
    for name, script in scripts.items():
        shebang, _, body = script.partition("\n")
        flags = _flags(shebang, f"{library} script {name}")
        parts.append(f"local function s_{name}(KEYS, ARGV)\n{_with_literals(body, tables)}\nend")
        registered.append(_register(function_name(name, library=library),
                                    f"function(KEYS, ARGV) NUMBERS, LH_RUN = {{}}, false "
                                    f"return s_{name}(KEYS, ARGV) end", flags))
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
    return f"redis.register_function{{function_name = '{name}', callback = {callback}, flags = {{{listed}}}}}"
