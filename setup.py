"""Packaging: ``pip install`` and ``scrapyd-deploy`` (``python setup.py bdist_egg``) both come here.

Everything but the C extension is configured in ``pyproject.toml`` (packages,
the Lua scripts and other package data, and the ``scrapy`` entry point naming
the settings module).

``crawler.dedup._simhash`` (SimHash in C) is optional: it needs a C compiler
and ``xxhash.h`` (Debian: ``libxxhash-dev``); without them the install goes
on and the crawler uses the pure-Python SimHash, which gives the same
fingerprints more slowly (it says so in the crawl's log). ``make venv``
builds it in place (``python setup.py build_ext --inplace``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("crawler.dedup._simhash", ["crawler/dedup/_simhash.c"], optional=True,
                  extra_compile_args=["-O2"]),
    ],
)
