"""The CDXJ index's key of a URL: its canonical SURT form, as replay tools compute it.

pywb and OutbackCDX use the ``surt`` package: ``com,example)/path?a=1&b=2``
(no scheme, host labels reversed, lowercase, no ``www``, query arguments
sorted, escapes decoded, an IP address reversed like a host name). The package
runs a dozen canonicalisation passes per URL (about 25 us), and asks the C
resolver to read back an IPv4 host. Most URLs a crawl writes are simple:
lowercase, no escapes, no query; for those every pass leaves the URL as it is
but for the host's reversal and a trailing slash, so :func:`surt` builds the
key directly (about 2 us) and hands every other URL to the package. A
property test holds the two equal over URLs of both kinds.
"""

from __future__ import annotations

import re

import surt as surt_package

#: A URL the fast path may take: http(s), a lowercase host of letters, digits, dots and hyphens, a port
#: without leading zeros, a path of unreserved lowercase characters and slashes; no query, no fragment.
_SIMPLE = re.compile(r"(https?)://([a-z0-9.-]+)(?::([1-9][0-9]{0,4}))?(/[a-z0-9/_.~-]*)?\Z")
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
#: An IPv4 address as the resolver writes it back (four octets, no leading zeros, not starting with 0).
_DOTTED_QUAD = re.compile(rf"[1-9][0-9]{{0,2}}\.{_OCTET}\.{_OCTET}\.{_OCTET}\Z")
#: The prefix the canonicaliser drops from a host.
_WWW = re.compile(r"www[0-9]*\.")
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def surt(url: str) -> str:
    """The canonical SURT key of ``url``, exactly as ``surt.surt(url)`` gives it."""
    match = _SIMPLE.match(url)
    if match is not None:
        key = _simple_key(*match.groups())
        if key is not None:
            return key
    return str(surt_package.surt(url))


def _simple_key(scheme: str, host: str, port: str | None, path: str | None) -> str | None:
    """The key of a simple URL, or None where one of the package's passes would change it."""
    if host[0] == "." or host[-1] == "." or ".." in host or _WWW.match(host):
        return None
    if host.replace(".", "").isdigit() and not _DOTTED_QUAD.match(host):
        return None  # a number, or an address written otherwise: the package rewrites it
    if port == _DEFAULT_PORTS[scheme]:
        return None
    path = path or "/"
    if "//" in path or "/./" in path or "/../" in path or path.endswith(("/.", "/..")):
        return None
    if len(path) > 1 and path[-1] == "/":
        path = path[:-1]
    labels = host.split(".")
    labels.reverse()
    reversed_host = ",".join(labels)
    return f"{reversed_host}:{port}){path}" if port else f"{reversed_host}){path}"
