"""The crawler's bytecode written before a benchmark starts crawls, as an installed package has it.

``pip install`` byte-compiles a package, and an interpreter writes
``__pycache__`` on first import, unless ``PYTHONDONTWRITEBYTECODE`` is set (as
it is on the machines these benchmarks run on). Then every worker start
compiled the crawler's ~150 modules from source again: about 0.25 s of CPU
per start that plain Scrapy, installed with its bytecode, never pays.
``compileall`` writes the files whatever that variable says, and skips the
ones already fresh.
"""

from __future__ import annotations

import compileall
from pathlib import Path


def compile_package(checkout: Path) -> None:
    """Write fresh ``.pyc`` files for ``checkout``'s ``crawler`` package (quietly; an error is raised)."""
    if not compileall.compile_dir(str(checkout / "crawler"), quiet=1, workers=0):
        raise RuntimeError(f"could not byte-compile {checkout / 'crawler'}")
