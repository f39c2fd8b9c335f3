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

import textwrap

import setuptools.command.bdist_egg as bdist_egg
from setuptools import Extension, setup

# The Scrapyd egg (`scrapyd-deploy`, `python setup.py bdist_egg`) loads each C extension through
# a stub module. setuptools 72 to 80 write one that asks importlib.resources.files() for the
# extension's own module, which Python 3.11 refuses ("is not a package"): the egg would not
# import. This stub asks for the extension's package, as the older pkg_resources stub did.
_EGG_STUB = textwrap.dedent(
    """
    def __bootstrap__():
        global __bootstrap__, __loader__, __file__
        import importlib.resources as irs, importlib.util
        with irs.as_file(irs.files(__name__.rpartition(".")[0]).joinpath(%r)) as __file__:
            __loader__ = None; del __bootstrap__, __loader__
            spec = importlib.util.spec_from_file_location(__name__, __file__)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
    __bootstrap__()
    """
).lstrip()


def _write_egg_stub(resource: str, pyfile: str) -> None:
    with open(pyfile, "w", encoding="utf-8") as handle:
        handle.write(_EGG_STUB % resource)


bdist_egg.write_stub = _write_egg_stub

setup(
    ext_modules=[
        Extension("crawler.dedup._simhash", ["crawler/dedup/_simhash.c"], optional=True,
                  extra_compile_args=["-O2"]),
        Extension("crawler.redisconn._resp", ["crawler/redisconn/_resp.c"], optional=True,
                  extra_compile_args=["-O2"]),
    ],
)
