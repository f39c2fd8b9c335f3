"""The docs name only what exists: settings, `scrapy frontier` subcommands and flags, Makefile targets.

README.md and every page of docs/ are read as a user reads them: a backticked
UPPER_SNAKE name is a setting (the crawler's, Scrapy's, or one of the
scrapy-redis or Spidermon settings the docs discuss), ``scrapy frontier X``
names a subcommand, a ``--flag`` on such a line one of its options, ``make X``
a Makefile target. A renamed or removed one fails here, naming the page.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from scrapy.settings import default_settings as scrapy_defaults

from crawler import defaults
from crawler.commands.frontier import SUBCOMMANDS, Command
from crawler.scrapysettings import RENAMED, TABLE

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]

#: Names in backticks that look like settings but are something else the docs name on purpose.
NOT_SETTINGS = {
    # environment variables and their parts
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "SCRAPY_SETTINGS_MODULE", "PYTHONPATH", "TEST_WORKERS",
    "COMPAT_SCRAPY", "COMPAT_TESTS", "USER_AGENT_TOKEN", "SCRAPYD_URL", "MONITOR_RESULTS",
    # Makefile variables
    "SEEDS", "URLS", "ARGS",
    "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
    # constants of the code the docs explain
    "BYTE_DECIMAL", "GROUP_CASES",
}
#: Settings of other projects the docs discuss (Spidermon's, scrapy-redis's spider settings).
OTHER_PROJECTS = re.compile(r"^(SPIDERMON_[A-Z_]+|REDIS_START_URLS_[A-Z_]+|REDIS_ENCODING|REDIS_ITEMS_KEY|"
                            r"REDIS_DB|MAX_IDLE_TIME_BEFORE_CLOSE|REDIS_DECODE_RESPONSES)$")
SETTING = re.compile(r"`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?: ?=[^`]*)?`")
MAKE = re.compile(r"(?:`|^\s*)make ([a-z][a-z-]*)\b")
FRONTIER = re.compile(r"scrapy frontier ([a-z][a-z-]*)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z-]*)")


def known_settings() -> set[str]:
    names = {name for name in dir(defaults) if name.isupper()}
    names |= {name for name in dir(scrapy_defaults) if name.isupper()}
    names |= {mapping.scrapy for mapping in TABLE} | {renamed.old for renamed in RENAMED}
    return names


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", text, re.MULTILINE))
    phony = re.search(r"^\.PHONY: (.*)$", text, re.MULTILINE)
    return targets | (set(phony.group(1).split()) if phony else set())


def frontier_flags() -> set[str]:
    from scrapy.settings import Settings

    parser = argparse.ArgumentParser(add_help=False)
    command = Command()
    command.settings = Settings()
    command.add_options(parser)
    return {option for action in parser._actions for option in action.option_strings}


@pytest.mark.parametrize("page", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_setting_subcommand_flag_and_make_target_a_page_names_exists(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    settings, targets, flags = known_settings(), makefile_targets(), frontier_flags()
    wrong: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        for name in SETTING.findall(line):
            if name not in settings and name not in NOT_SETTINGS and not OTHER_PROJECTS.match(name):
                wrong.append(f"line {number}: setting {name}")
        for target in MAKE.findall(line):
            if target not in targets:
                wrong.append(f"line {number}: make {target}")
        for sub in FRONTIER.findall(line):
            if sub not in SUBCOMMANDS:
                wrong.append(f"line {number}: scrapy frontier {sub}")
        if FRONTIER.search(line):
            for flag in FLAG.findall(line.split("scrapy frontier", 1)[1]):
                if flag not in flags:
                    wrong.append(f"line {number}: scrapy frontier ... {flag}")
    assert not wrong, f"{page.relative_to(ROOT)} names what does not exist: {wrong}"


def test_the_check_would_catch_a_stale_name() -> None:
    """The patterns find what they are for (else the test above could pass on anything)."""
    line = "Set `WARC_S3_BUCKET = x`, run `make tests`, then `scrapy frontier purge --force`."
    assert SETTING.findall(line) == ["WARC_S3_BUCKET"] and "WARC_S3_BUCKET" not in known_settings()
    assert MAKE.findall(line) == ["tests"] and "tests" not in makefile_targets()
    assert FRONTIER.findall(line) == ["purge"] and "purge" not in SUBCOMMANDS
    assert FLAG.findall(line.split("scrapy frontier", 1)[1]) == ["--force"] and "--force" not in frontier_flags()
    assert {"crawl", "test", "unit", "docs", "reference"} <= makefile_targets()
    assert {"--crawl-id", "--json", "--yes"} <= frontier_flags()
