"""The request that fetches a robots.txt: built in one place, for the frontier's robots.txt lease
(:func:`robots_lease_request`) and for the middleware's redirect hops (:func:`robots_request`).

It is marked with ``ROBOTS_META`` (the robots.txt middleware judges its answer,
the retry middleware leaves it alone), takes every status to the middleware
(``handle_httpstatus_all``), bypasses the seen set (``dont_filter``) and has no
callback: it is not a page of the crawl.
"""

from __future__ import annotations

from scrapy import Request
from scrapy.http.request import NO_CALLBACK

from crawler.requestmeta import ROBOTS_META
from crawler.robots.policy import ROBOTS_PATH, origin_of


def robots_request(url: str) -> Request:
    """A request for the robots.txt at ``url`` (``<origin>/robots.txt``, or a redirect's target)."""
    return Request(url, callback=NO_CALLBACK, dont_filter=True, meta={ROBOTS_META: True, "handle_httpstatus_all": True})


def robots_lease_request(page_url: str) -> Request:
    """The request for a robots.txt lease whose host's first queued page is ``page_url``."""
    return robots_request(origin_of(page_url) + ROBOTS_PATH)
