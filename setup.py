"""Packaging: ``pip install`` and ``scrapyd-deploy`` (``python setup.py bdist_egg``) both come here.

Everything but the C extension is configured in ``pyproject.toml`` (packages,
the Lua scripts and other package data, and the ``scrapy`` entry point naming
the settings module).

The two C extensions are optional: ``crawler.dedup._simhash`` (SimHash in C)
needs a C compiler and ``xxhash.h`` (Debian: ``libxxhash-dev``),
``crawler.redisconn._resp`` (Redis commands encoded in C) a C compiler.
Without them the install goes on and the crawler uses the pure-Python
versions, which give the same results more slowly (a missing SimHash
extension is said in the crawl's log). ``make venv`` builds them in place
(``python setup.py build_ext --inplace``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("crawler.dedup._simhash", ["crawler/dedup/_simhash.c"], optional=True,
                  extra_compile_args=["-O2"]),
        Extension("crawler.redisconn._resp", ["crawler/redisconn/_resp.c"], optional=True,
                  extra_compile_args=["-O2"]),
    ],
)
