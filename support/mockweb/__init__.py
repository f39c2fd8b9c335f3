"""A multi-host mock web served on loopback, for tests and benchmarks.

Every host is a distinct loopback address (``127.a.b.c``) on one port: a server
bound to ``0.0.0.0`` answers them all and tells them apart by the local address
of the connection, so no DNS is involved.

The site graph is a pure function of the parameters (:class:`WebSpec`), so a
test can compute the set of reachable pages without asking the server.

Every request is logged as one tab-separated line::

    host  method  path  start  end  status

with ``start`` when the request was read and ``end`` when the response was
written (``time.time()`` seconds), so tests can check politeness from the
server's side.

Run as ``python -m support.mockweb --port 8000 --hosts 50 ...``. Modules:
:mod:`~support.mockweb.web` (the shape and the pages, pure),
:mod:`~support.mockweb.site` (what each path answers),
:mod:`~support.mockweb.protocol` (the server), :mod:`~support.mockweb.log`
(the request log and the politeness check).
"""


from support.mockweb.log import DelayAudit, LogEntry, PolitenessReport, delay_audit, politeness, read_log
from support.mockweb.protocol import MockWebProtocol, SilentProtocol, free_port, serve_forever
from support.mockweb.site import SPECIAL_PATHS, MockWebServer, Reply, Scenario
from support.mockweb.web import (
    TINY_PNG,
    WebSpec,
    filler_text,
    host_index,
    host_ip,
    near_duplicate_words,
    page_path,
    parse_page_path,
    render_page,
    spec_arguments,
)

__all__ = [
    "SPECIAL_PATHS",
    "TINY_PNG",
    "DelayAudit",
    "LogEntry",
    "MockWebProtocol",
    "MockWebServer",
    "PolitenessReport",
    "Reply",
    "Scenario",
    "SilentProtocol",
    "WebSpec",
    "delay_audit",
    "filler_text",
    "free_port",
    "host_index",
    "host_ip",
    "near_duplicate_words",
    "page_path",
    "parse_page_path",
    "politeness",
    "read_log",
    "render_page",
    "serve_forever",
    "spec_arguments",
]
