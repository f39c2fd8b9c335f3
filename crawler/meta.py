"""``Request.meta`` keys the crawler's components share (one place, plain strings)."""

#: The response's Content-Encoding before decompression (for the WARC headers).
ORIGINAL_ENCODING_META = "original_content_encoding"
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
