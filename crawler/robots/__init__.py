"""robots.txt by RFC 9309: pure policy (``policy``), the shared cache (``store``).

The downloader middleware that fetches and enforces it is
:mod:`crawler.middlewares.robots`.
"""

from crawler.robots.cache import RobotsStore
from crawler.robots.policy import RobotsConfig, RobotsRecord, RobotsRules, RobotsState

__all__ = ["RobotsConfig", "RobotsRecord", "RobotsRules", "RobotsState", "RobotsStore"]
