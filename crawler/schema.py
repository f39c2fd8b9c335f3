"""The Redis schema the Lua scripts share with Python, and the scripts as they are loaded.

One source for each fact: the keys of a frontier shard
(:data:`crawler.frontier.keys.SHARD_KEYS`, the duplicate index's among them)
and the layout of a URL record (:mod:`crawler.metadata.record`).
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
from importlib import resources

from crawler.frontier.keys import SHARD_KEYS
from crawler.metadata import record


def _lua_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _tables() -> dict[str, dict[str, str]]:
    """Each schema table's names and their Lua literals."""
    return {
        "K": {name: _lua_string(key.suffix) for name, key in SHARD_KEYS.items()},
        "URLREC": {field: str(index) for index, field in enumerate(record.RECORD_FIELDS, start=1)},
        "URLREC_FLAG": {name: str(getattr(record, name)) for name in record.RECORD_FLAGS},
        "URL_STATE": {state.name: str(int(state)) for state in record.UrlState},
    }


def _constants() -> dict[str, str]:
    return {
        "URLREC_FORMAT": _lua_string(record.RECORD_LUA_FORMAT),
        "URLREC_COUNT": str(len(record.RECORD_FIELDS)),
        "URLREC_VERSION": str(record.RECORD_VERSION),
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
    """common.lua cut into its top-level definitions (``local function f`` or ``local X =`` at the
    start of a line, with the comments above it), each with its name, in order."""
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
    """A script as it is loaded: ``shebang``, the schema entries it names as literals, the shared
    helpers of ``crawler/frontier/lua/common.lua`` it uses (directly or through another helper;
    none unless ``common``), then ``body``. Only what is used is defined: Redis runs a script's
    whole text, every helper definition included, on each call."""
    tables = _tables()
    body = _with_literals(body, tables)
    wanted = _words(body)
    chosen: list[str] = []
    if common:
        helpers = _definitions(
            _with_literals((resources.files("crawler.frontier") / "lua" / "common.lua").read_text(encoding="utf-8"),
                           tables))
        for name, text in reversed(helpers):  # a helper only uses those defined above it
            if name in wanted:
                chosen.append(text)
                wanted |= _words(text)
        chosen.reverse()
    prelude = [f"local {table} = {{{', '.join(f'{name} = {value}' for name, value in entries.items())}}}"
               for table, entries in tables.items() if table in wanted]
    prelude += [f"local {name} = {value}" for name, value in _constants().items() if name in wanted]
    return "\n".join([shebang, *prelude, *chosen, body])


def script_source(package: str, name: str, *, common: bool = True) -> str:
    """A Lua script of ``package`` (``crawler.frontier``: ``lua/<name>.lua``) as it is loaded
    (:func:`compose`): its ``#!lua`` line (the script's flags, Redis 7), the schema entries it
    names, the shared helpers it uses unless ``common`` is false, then the script.

    Every script starts with ``#!lua``: Redis then refuses a script that would write while memory
    is over ``maxmemory`` before it starts, never halfway (``allow-oom`` is never given).
    """
    script = (resources.files(package) / "lua" / f"{name}.lua").read_text(encoding="utf-8")
    shebang, _, body = script.partition("\n")
    if not shebang.startswith("#!lua"):
        raise ValueError(f"{package} lua/{name}.lua must start with a #!lua line (its flags)")
    return compose(shebang, body, common=common)
