"""Packaging for Scrapyd: ``scrapyd-deploy`` builds an egg with ``python setup.py bdist_egg``.

Everything is configured in ``pyproject.toml`` (packages, the Lua scripts and
other package data, and the ``scrapy`` entry point naming the settings module).
"""

from setuptools import setup

setup()
