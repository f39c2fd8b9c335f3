"""Scrapy settings of this repository's project: the crawler add-on and the ``web`` spider.

The crawler itself is the add-on (:mod:`crawler.addon`), exactly as a team's
own project uses it: it sets the frontier scheduler, the middlewares, the
archive and the extensions. The crawler's own settings (``FRONTIER_*``,
``REDIS_*``, ``ROBOTS_*``...) are defined, each with its default and reason,
in :mod:`crawler.defaults` and imported here, so ``scrapy settings --get
NAME`` answers for every one. The broad-crawl choices of the ``web`` spider
(no offsite filter, every status to the callback, redirects followed as new
URLs, HTML only) are its own ``custom_settings``.
"""

from crawler.defaults import *  # noqa: F403

BOT_NAME = "crawler"
SPIDER_MODULES = ["crawler.spiders"]
NEWSPIDER_MODULE = "crawler.spiders"
# Our `crawl` command checks settings, spider arguments and Redis before the
# crawl starts, so a configuration mistake is one line, not a traceback.
COMMANDS_MODULE = "crawler.commands"

ADDONS = {"crawler.addon.CrawlerAddon": 0}

# Identify the crawler with a contact URL (operators: set your own).
USER_AGENT = "crawler/0.1 (+https://example.invalid/crawler; set USER_AGENT to a page about your crawl)"

LOG_LEVEL = "INFO"
