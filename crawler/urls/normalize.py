"""URL normalization, version 2 (RFC 3986 section 6, plus crawler rules).

One function, :func:`normalize_url`, applied to every URL before the seen
check, so that equivalent URLs are fetched once. In order: whitespace at the
ends and ASCII tabs and newlines anywhere removed (:func:`clean_reference`,
as browsers do); scheme and host lowercased, a percent-encoded host decoded
when it is valid UTF-8 (else :class:`EncodedHostError`), an IDN host to
punycode (UTS 46), a trailing dot dropped; the default port dropped; userinfo
dropped; percent-encoding normalized (unreserved escapes decoded, reserved
ones kept, invalid ``%`` encoded); dot segments removed, an empty path made
``/``; session-id path parameters and tracking or session query parameters
(``URL_SESSION_PARAMS``, ``URL_TRACKING_PARAMS``) removed, the query sorted
only with ``URL_SORT_QUERY``; the fragment dropped. A URL with other control
characters, without ``scheme://host``, with a bad host or port is refused
(:class:`UrlError`).

The rules one by one, with their RFC sections and why w3lib's
``canonicalize_url`` is not used: docs/urls.md. The fast path (an ASCII URL
with nothing to fix) costs a few microseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote, unquote, unquote_to_bytes

import idna
from scrapy.settings import BaseSettings

from crawler import defaults
from crawler.exceptions import CrawlerError
from crawler.settings_parsing import get_bool, get_list

NORMALIZATION_VERSION = 2

DEFAULT_PORTS = {"http": 80, "https": 443}

#: Query parameters that only track campaigns and clicks; ones that carry a session id.
DEFAULT_TRACKING_PARAMS = tuple(defaults.URL_TRACKING_PARAMS)
DEFAULT_SESSION_PARAMS = tuple(defaults.URL_SESSION_PARAMS)

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# Characters that may appear unencoded in a path/query (RFC 3986 pchar + "/" + "?"), plus "%".
_SAFE = "!$&'()*+,;=:@/?%" + "-._~"
_CLEAN = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/?]*\Z")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_HOST_NAME = re.compile(r"[a-z0-9_\-]+(?:\.[a-z0-9_\-]+)*\Z")


class UrlError(CrawlerError, ValueError):
    """A URL that cannot be crawled: malformed, no host, bad port, bad host."""


class EncodedHostError(UrlError):
    """A percent-encoded host that does not decode to a valid one (``urls/dropped/encoded_host``)."""


@dataclass(frozen=True)
class NormalizationConfig:
    tracking_params: frozenset[str] = frozenset(p for p in DEFAULT_TRACKING_PARAMS if not p.endswith("*"))
    tracking_prefixes: tuple[str, ...] = tuple(p[:-1] for p in DEFAULT_TRACKING_PARAMS if p.endswith("*"))
    session_params: frozenset[str] = frozenset(p for p in DEFAULT_SESSION_PARAMS if not p.endswith("*"))
    session_prefixes: tuple[str, ...] = tuple(p[:-1] for p in DEFAULT_SESSION_PARAMS if p.endswith("*"))
    sort_query: bool = False

    def __post_init__(self) -> None:
        # A key of the bounded caches below, read for every page: hashed once.
        fields = (self.tracking_params, self.tracking_prefixes, self.session_params, self.session_prefixes,
                  self.sort_query)
        object.__setattr__(self, "_hash", hash(fields))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined,no-any-return]

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> NormalizationConfig:
        """The crawl's configuration: one object for every component that asks for the same one (a cache
        finds it by identity, not by comparing its fields)."""
        tracking = [str(p).lower() for p in get_list(settings, "URL_TRACKING_PARAMS")]
        session = [str(p).lower() for p in get_list(settings, "URL_SESSION_PARAMS")]
        config = cls(
            tracking_params=frozenset(p for p in tracking if not p.endswith("*")),
            tracking_prefixes=tuple(p[:-1] for p in tracking if p.endswith("*")),
            session_params=frozenset(p for p in session if not p.endswith("*")),
            session_prefixes=tuple(p[:-1] for p in session if p.endswith("*")),
            sort_query=get_bool(settings, "URL_SORT_QUERY"),
        )
        if len(_configs) >= 64:
            _configs.clear()
        return _configs.setdefault(config, config)

    def drops_param(self, name: str) -> bool:
        return (
            name in self.tracking_params
            or name in self.session_params
            or name.startswith(self.tracking_prefixes or ("\0",))
            or name.startswith(self.session_prefixes or ("\0",))
        )

    def is_session_param(self, name: str) -> bool:
        return name in self.session_params or name.startswith(self.session_prefixes or ("\0",))

    @property
    def _session_path_param(self) -> re.Pattern[str]:
        names = "|".join(
            [re.escape(p) for p in sorted(self.session_params)]
            + [re.escape(p) + "[^=;/]*" for p in self.session_prefixes]
        )
        return re.compile(rf";(?:{names})=[^;/]*", re.IGNORECASE)


DEFAULT_CONFIG = NormalizationConfig()
#: The configurations :meth:`NormalizationConfig.from_settings` made, each kept once (bounded).
_configs: dict[NormalizationConfig, NormalizationConfig] = {DEFAULT_CONFIG: DEFAULT_CONFIG}
_session_patterns: dict[NormalizationConfig, re.Pattern[str]] = {}


def _escapes(text: str) -> str:
    """Percent-encoding normalization of a path or query (rule 5)."""
    if _CLEAN.match(text):
        return text
    if not text.isascii() or not _CLEAN.match(text.replace("%", "")):
        text = quote(text, safe=_SAFE, encoding="utf-8", errors="surrogateescape")
    if "%" in text:
        text = _BAD_ESCAPE.sub("%25", text)
        text = _ESCAPE.sub(_fix_escape, text)
    return text


def _fix_escape(match: re.Match[str]) -> str:
    char = chr(int(match.group(1), 16))
    return char if char in _UNRESERVED else "%" + match.group(1).upper()


def remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4."""
    if "." not in path:
        return path
    output: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                output.append("")
        elif segment == "..":
            if len(output) > 1 or (output and output[0] != ""):
                output.pop()
            if last:
                output.append("")
        else:
            output.append(segment)
    result = "/".join(output)
    if path.startswith("/") and not result.startswith("/"):
        result = "/" + result
    return result


def _host(raw: str) -> str:
    host = raw
    if "%" in host and not host.startswith("["):
        # The WHATWG host parser percent-decodes a domain (UTF-8) before IDNA; the result must
        # then be a valid host like any other (a decoded "/", "%" or space is refused below).
        try:
            host = unquote_to_bytes(host).decode("utf-8")
        except UnicodeDecodeError:
            raise EncodedHostError(f"percent-encoded host {raw!r} is not UTF-8") from None
        if "%" in host:
            raise EncodedHostError(f"percent-encoded host {raw!r} decodes to another escape")
        try:
            return _host(host)
        except UrlError as exc:
            raise EncodedHostError(f"percent-encoded host {raw!r}: {exc}") from None
    host = host.lower()
    if host.startswith("["):
        if not host.endswith("]") or len(host) < 3:
            raise UrlError(f"bad IPv6 host {raw!r}")
        return host
    host = host.rstrip(".")
    if not host:
        raise UrlError("empty host")
    if not host.isascii():
        try:
            host = idna.encode(host, uts46=True, transitional=False).decode("ascii")
        except (idna.IDNAError, UnicodeError, ValueError) as exc:
            raise UrlError(f"bad internationalized host {raw!r}: {exc}") from None
    if not _HOST_NAME.match(host):
        raise UrlError(f"bad host {raw!r}")
    return host


def _query(query: str, config: NormalizationConfig) -> str:
    kept: list[str] = []
    for piece in query.split("&"):
        if not piece:
            continue
        name = piece.split("=", 1)[0]
        lowered = (unquote(name) if "%" in name else name).lower()
        if config.drops_param(lowered):
            continue
        kept.append(_escapes(piece))
    if config.sort_query:
        kept.sort(key=lambda p: (p.split("=", 1)[0], p))
    return "&".join(kept)


#: An absolute URL's scheme, authority (None without ``//``), path and query (None without ``?``), as RFC 3986
#: splits them (also the WARC request line's target: crawler/warc/records.py url_target).
URL_PARTS = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#.*)?\Z", re.DOTALL)
_PORT = re.compile(r"[0-9]{0,5}\Z")
_hosts: dict[str, str] = {}
_MAX_HOSTS = 50_000


def _split_authority(authority: str, url: str) -> tuple[str, int | None]:
    """(raw host, port) of ``[userinfo@]host[:port]``; userinfo is dropped."""
    hostport = authority.rpartition("@")[2]
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise UrlError(f"bad IPv6 host in {url!r}")
        host, rest = hostport[: end + 1], hostport[end + 1 :]
        if rest and not rest.startswith(":"):
            raise UrlError(f"bad host in {url!r}")
        port_text = rest[1:]
    else:
        host, _, port_text = hostport.partition(":")
    if not _PORT.match(port_text):
        raise UrlError(f"bad port in {url!r}")
    port = int(port_text) if port_text else None
    if port is not None and port > 65535:
        raise UrlError(f"port out of range in {url!r}")
    return host, port


#: What the WHATWG URL parser strips from both ends of a reference (C0 controls and space), and
#: removes anywhere (ASCII tab and newline), before it parses it.
_C0_AND_SPACE = "".join(map(chr, range(0x21)))
_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")


def clean_reference(text: str) -> str:
    """A link as browsers read it (WHATWG URL standard, basic URL parser, first steps): leading and
    trailing C0 controls and spaces stripped, ASCII tabs and newlines removed anywhere
    (``"/a\n/b "`` -> ``"/a/b"``). An ``href`` written over several lines means the joined URL."""
    text = text.strip(_C0_AND_SPACE)
    if not text.isprintable():
        text = text.translate(_TAB_NEWLINE)
    return text


def normalize_url(url: str, config: NormalizationConfig = DEFAULT_CONFIG) -> tuple[str, str]:
    """Return ``(normalized_url, host)`` for an absolute http(s) URL, or raise :class:`UrlError`."""
    normalized, host, _ = normalize_url_parts(url, config)
    return normalized, host


@lru_cache(maxsize=1024)
def normalize_page_url(url: str, config: NormalizationConfig = DEFAULT_CONFIG) -> tuple[str, str]:
    """:func:`normalize_url` of a fetched page's URL, remembered (bounded) for the item pipelines that
    each need it (duplicates, metadata, recrawl): normalized once per page."""
    return normalize_url(url, config)


def normalize_url_parts(url: str, config: NormalizationConfig = DEFAULT_CONFIG) -> tuple[str, str, str]:
    """Like :func:`normalize_url`, plus the normalized path (for the filters)."""
    url = url.strip()
    if _CONTROL.search(url):
        url = url.translate(_TAB_NEWLINE)  # as a browser reads it; any other control is refused
        if _CONTROL.search(url):
            raise UrlError(f"control characters in {url!r}")
    match = URL_PARTS.match(url)
    if match is None:
        raise UrlError(f"malformed URL {url!r}")
    scheme_text, authority, path, query = match.groups()
    scheme = scheme_text.lower()
    default_port = DEFAULT_PORTS.get(scheme)
    if default_port is None:
        raise UrlError(f"unsupported scheme in {url!r}")
    if not authority:
        raise UrlError(f"no host in {url!r}")
    raw_host, port = _split_authority(authority, url)
    host = _hosts.get(raw_host)
    if host is None:
        if not raw_host:
            raise UrlError(f"no host in {url!r}")
        host = _host(raw_host)
        if len(_hosts) >= _MAX_HOSTS:
            _hosts.clear()
        _hosts[raw_host] = host
    netloc = host if port is None or port == default_port else f"{host}:{port}"
    if path:
        if ";" in path:
            pattern = _session_patterns.get(config)
            if pattern is None:
                pattern = _session_patterns[config] = config._session_path_param
            path = pattern.sub("", path)
        path = _escapes(path)
        if "/." in path or path.startswith("."):
            path = remove_dot_segments(path)
    if not path:
        path = "/"
    elif path[0] != "/":
        path = "/" + path
    normalized = f"{scheme}://{netloc}{path}"
    if query:
        query = _query(query, config)
        if query:
            normalized = f"{normalized}?{query}"
    return normalized, host, path
