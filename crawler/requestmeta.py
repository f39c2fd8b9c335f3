"""Every ``Request.meta`` key of the crawler's own, in one place (plain strings).

Scrapy's own keys (``depth``, ``download_latency``, ``download_timeout``,
``download_maxsize``, ``handle_httpstatus_all``, ``proxy``...) keep their
Scrapy meaning and are not repeated here. Keys marked process-local never
reach the frontier's store (:data:`crawler.frontier.codec.PROCESS_LOCAL_META`).
"""

#: The response's Content-Encoding values as received, set when the body was decoded (Scrapy then
#: deletes the header), and where the header stood among the response's (name, value) pairs: the
#: page item puts it back there, the WARC keeps it renamed.
ORIGINAL_ENCODING_META = "original_content_encoding"
ORIGINAL_ENCODING_AT_META = "original_content_encoding_at"
#: Media types a page module asked for: they pass the extension and content-type gates.
EXPECTED_TYPES_META = "expected_content_types"
#: A revisit scheduled by the recrawl pipeline: {"etag": str, "lm": epoch seconds,
#: "date": WARC date of the capture it revalidates} (any may be absent).
REVISIT_META = "revisit"
#: A robots.txt fetch made by the robots.txt middleware, or handed out by the frontier
#: as a host's first request (a robots.txt lease).
ROBOTS_META = "robots_txt_fetch"
#: Set by the download handler when it starts contacting the request's host: a
#: request without it never reached the network, so its host owes no politeness delay.
CONTACTED_META = "host_contacted"
#: Check this URL against the frontier's exact seen store only, not the Bloom filter (sitemap URLs).
EXACT_SEEN_META = "frontier_exact_seen"
#: The :class:`~crawler.frontier.outcome.Handout` of a request served by the frontier (process-local).
LEASE_META = "frontier_lease"
#: A URL stored already normalized: the download handler sends it as it is (process-local).
VERBATIM_URL_META = "verbatim_url"
#: Retries of a URL so far: of transient failures, and of 429/503 answers.
RETRY_META = "retry_times"
THROTTLED_META = "throttled_times"
#: A sitemap fetch (its body type is not filtered).
SITEMAP_META = "sitemap"
#: A URL a sitemap listed: the flag, and its ``lastmod`` as written.
FROM_SITEMAP_META = "from_sitemap"
SITEMAP_LASTMOD_META = "sitemap_lastmod"
#: Keep at most about this many bytes of the body: the download stops once more arrived and the
#: response has what did (not a failure, unlike ``download_maxsize``; robots.txt's cap).
BODY_LIMIT_META = "body_limit"
#: The page module that asked for a request (its responses go back to it).
MODULE_META = "module"
#: Render this request's page in the browser (True) or never (False), whatever its host's mark.
RENDER_META = "render"
#: The rendered page (:class:`crawler.render.browser.RenderedPage`), set by the render
#: middleware on a response it rendered (process-local).
RENDERED_META = "rendered"
