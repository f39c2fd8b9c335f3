"""What a rendered page may ask for (pure policy; the browser module applies it).

Every request the page makes (scripts, XHR and fetch calls, frames) is
intercepted. The page's own document is never fetched again: the browser is
given the response the crawler already has. The rest is decided here:

* resource types in ``RENDER_BLOCKED_RESOURCE_TYPES`` (images, fonts, media,
  stylesheets, sockets... by default) are aborted;
* only ``http`` and ``https``;
* only the page's own origin, and the hosts of ``RENDER_SUBREQUEST_HOSTS``
  (a CDN the sites need), whose addresses must pass the crawl's address guard
  (``ALLOW_PRIVATE_NETWORKS``, ``PRIVATE_NETWORKS_ALLOWLIST``); every other
  host is aborted (its robots.txt and politeness are not the page's);
* the page's origin only where its robots.txt allows (the crawl's rules);
* at most ``RENDER_MAX_SUBREQUESTS`` per page.

What passes is fetched one at a time per page, each after the politeness
delay since the previous request to the host ended (the page's own fetch
first), while the page's frontier lease holds the host: the host sees one
request at a time and no gap below the delay.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from crawler.robots.policy import origin_of


class Decision(Enum):
    """What happens to one request the page makes (``render/subrequests/<value>`` counts them)."""

    DOCUMENT = "document"  # the page's own document: the crawler's response is given
    FETCH = "fetched"
    BLOCKED_TYPE = "blocked_type"
    BLOCKED_SCHEME = "blocked_scheme"
    BLOCKED_HOST = "blocked_host"
    BLOCKED_ROBOTS = "blocked_robots"
    BLOCKED_ADDRESS = "blocked_address"
    BLOCKED_BUDGET = "blocked_budget"

    @property
    def allowed(self) -> bool:
        return self in (Decision.DOCUMENT, Decision.FETCH)


#: Resource types aborted by default: nothing the DOM's text and links are built from.
DEFAULT_BLOCKED_TYPES = ("image", "media", "font", "stylesheet", "texttrack", "eventsource", "websocket",
                         "manifest", "other")


@dataclass(frozen=True)
class SubrequestPolicy:
    blocked_types: frozenset[str] = frozenset(DEFAULT_BLOCKED_TYPES)
    extra_hosts: frozenset[str] = frozenset()
    max_requests: int = 30

    def decide(self, url: str, resource_type: str, page_url: str, made: int, navigation: bool) -> Decision:
        """The first verdict on a request (robots.txt and addresses are checked by the caller after).

        ``made``: requests of this page fetched so far; ``navigation``: a
        document request of the top frame.
        """
        if navigation and url.split("#", 1)[0] == page_url.split("#", 1)[0]:
            return Decision.DOCUMENT
        if resource_type in self.blocked_types:
            return Decision.BLOCKED_TYPE
        if not url.startswith(("http://", "https://")):
            return Decision.BLOCKED_SCHEME
        if navigation:
            # The page navigating elsewhere (a script redirect): the crawl follows
            # links, not the browser; the DOM is taken as it is.
            return Decision.BLOCKED_HOST
        if not self.same_origin(url, page_url) and host_of_url(url) not in self.extra_hosts:
            return Decision.BLOCKED_HOST
        if made >= self.max_requests:
            return Decision.BLOCKED_BUDGET
        return Decision.FETCH

    def same_origin(self, url: str, page_url: str) -> bool:
        return origin_of(url).lower() == origin_of(page_url).lower()


def host_of_url(url: str) -> str:
    """The host of an absolute URL, lowercased, without port or userinfo."""
    netloc = origin_of(url).partition("://")[2].rpartition("@")[2]
    if netloc.startswith("["):
        return netloc[: netloc.find("]") + 1].lower()
    return netloc.partition(":")[0].lower()
