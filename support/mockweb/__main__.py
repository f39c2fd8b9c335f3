"""Run the mock web: ``python -m support.mockweb --port 8000 --hosts 50 ...``."""

from __future__ import annotations

import argparse
import asyncio
import os

from support.mockweb.protocol import serve_forever
from support.mockweb.web import WebSpec


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A multi-host mock web served on loopback.")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--sizes", default="uniform:20")
    parser.add_argument("--fanout", type=int, default=4)
    parser.add_argument("--nav", type=int, default=3)
    parser.add_argument("--cross", type=int, default=2)
    parser.add_argument("--latency-ms", default="0")
    parser.add_argument("--filler-words", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--extras", action="store_true")
    parser.add_argument("--scenario", default="")
    parser.add_argument("--paths", default="short", choices=("short", "real"))
    parser.add_argument("--log", default=None)
    parser.add_argument("--log-flush", type=float, default=0.0,
                        help="flush the request log at most this many seconds after a line (0: every line)")
    parser.add_argument("--silent-port", type=int, default=0,
                        help="also accept connections on this port and never answer them (dead hosts that listen)")
    parser.add_argument("--prerender", action="store_true",
                        help="render every page before listening (benchmarks: the web's CPU goes to serving)")
    args = parser.parse_args(argv)
    spec = WebSpec(
        hosts=args.hosts, sizes=args.sizes, fanout=args.fanout, nav=args.nav,
        cross=args.cross, latency_ms=tuple(float(x) for x in args.latency_ms.split(",")),
        filler_words=args.filler_words, seed=args.seed, extras=args.extras, scenario=args.scenario,
        paths=args.paths,
    )
    if os.environ.get("MOCKWEB_NICE"):
        os.nice(int(os.environ["MOCKWEB_NICE"]))
    asyncio.run(serve_forever(spec, args.port, args.log, args.log_flush, args.prerender, args.silent_port))


if __name__ == "__main__":
    main()
