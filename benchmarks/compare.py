"""This checkout against another, alternated in one run: the pipeline and the polite broad crawl.

A change that should not make the crawl slower is judged here: each round
crawls, with the shipped settings (politeness on, the full pipeline), with
this checkout's code and with the other's, in alternating order, so that the
machine's drift falls on both alike:

* ``throughput.py``'s two headline webs (2,000 hosts; 5 KB pages with 12
  links, 30 KB pages with 60): pages/s, CPU per page of the worker (all of
  it, start-up and the closing report included; and "steady", from a third
  of the crawl time to 90% of it) and of redis-server, and the worker and
  redis-server together (the tree);
* ``polite.py``'s web (5,000 hosts of 10 pages, 5-20 ms latency, a
  robots.txt mix), alive and with a dead twin for every second host:
  pages/s, the worker's and redis-server's CPU per page (the worker's all
  of it, start-up included), politeness violations.

It prints each run, then per checkout the median and the range over the
rounds: a difference of medians inside both ranges is the machine's noise.
``--checkout`` is a directory with the other code, its C extensions built
(``git worktree add DIR COMMIT``, then ``python setup.py build_ext
--inplace`` there with this venv's Python); given more than once, every
checkout crawls in each round, each round starting one checkout further on.

Usage: ``python benchmarks/compare.py --checkout DIR [--rounds 3] [--seconds 30] [--polite-seconds 45]``;
``--skip-pipeline`` crawls the polite web alone, ``--skip-dead`` leaves out its half-dead crawl.
Not a test: the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import polite  # noqa: E402
import throughput  # noqa: E402


def row(checkout: Path, web: str, values: dict[str, float]) -> dict[str, object]:
    return {"checkout": checkout, "web": web, **values}


def spread(runs: list[dict[str, object]], key: str) -> str:
    values = [float(run[key]) for run in runs]  # type: ignore[arg-type]
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def in_turn(checkouts: list[Path], round_: int) -> list[Path]:
    """The checkouts in round ``round_``'s order: each round starts one further on (two alternate)."""
    start = round_ % len(checkouts)
    return checkouts[start:] + checkouts[:start]


def main() -> None:
    parser = argparse.ArgumentParser(description="this checkout against another, alternated")
    parser.add_argument("--checkout", type=Path, required=True, action="append",
                        help="another checkout (C extensions built); repeat it for several")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=30, help="crawl time on the pipeline's webs")
    parser.add_argument("--polite-seconds", type=int, default=45, help="crawl time on the polite web")
    parser.add_argument("--hosts", type=int, default=2000, help="hosts of the pipeline's webs")
    parser.add_argument("--polite-hosts", type=int, default=5000, help="hosts of the polite web")
    parser.add_argument("--skip-polite", action="store_true", help="the pipeline's webs alone")
    parser.add_argument("--skip-pipeline", action="store_true", help="the polite web alone")
    parser.add_argument("--skip-dead", action="store_true", help="on the polite web, the crawl at defaults alone")
    args = parser.parse_args()
    others = [path.resolve() for path in args.checkout]
    for other in others:
        if not (other / "crawler").is_dir():
            parser.error(f"--checkout {other}: no crawler package there")
    if args.skip_polite and args.skip_pipeline:
        parser.error("--skip-polite with --skip-pipeline leaves nothing to crawl")
    checkouts = [ROOT, *others]
    workdir = Path(tempfile.mkdtemp(prefix="compare-"))
    services = throughput.Services(workdir)
    results: list[dict[str, object]] = []
    try:
        pipeline_webs = {} if args.skip_pipeline else throughput.headline_webs(args.hosts)
        for name, spec in pipeline_webs.items():
            web = throughput.Web(spec, workdir / f"web-{len(results)}.log")
            try:
                seeds = web.seeds(workdir / "seeds.txt")
                for round_ in range(args.rounds):
                    for checkout in in_turn(checkouts, round_):
                        command = throughput.crawler_command(seeds, services, f"cmp-{uuid.uuid4().hex[:8]}",
                                                             args.seconds)
                        run = throughput.measure(name, web, services, [(command, checkout)], args.seconds, polite=True)
                        results.append(row(checkout, name, {
                            "pages/s": run.pages_per_second, "worker ms/page": run.cpu_ms_per_page,
                            "steady worker ms/page": run.steady_ms_per_page,
                            "redis ms/page": run.redis_ms_per_page, "tree ms/page": run.tree_ms_per_page,
                            "violations": run.overlaps + run.short_gaps,
                        }))
                        print(results[-1], flush=True)
            finally:
                web.stop()
        if not args.skip_polite:
            spec = polite.web_spec(args.polite_hosts, workdir)
            web = polite.DeadWeb(spec, workdir, "polite")
            try:
                seeds = {"polite (defaults)": web.seeds(workdir / "alive.txt", dead=False)}
                if not args.skip_dead:
                    seeds["polite, half dead"] = web.seeds(workdir / "dead.txt", dead=True)
                for round_ in range(args.rounds):
                    for label, path in seeds.items():
                        for checkout in in_turn(checkouts, round_):
                            crawl = polite.crawl(label, web, services, path, args.polite_seconds, [], root=checkout)
                            results.append(row(checkout, label, {
                                "pages/s": crawl.pages_per_second,
                                "worker ms/page": 1000 * crawl.worker_cpu / crawl.pages if crawl.pages else 0.0,
                                "redis ms/page": 1000 * crawl.redis_cpu / crawl.pages if crawl.pages else 0.0,
                                "violations": crawl.audit.overlaps + crawl.audit.short_gaps,
                            }))
                            print(results[-1], flush=True)
            finally:
                web.stop()
    finally:
        services.stop()
    print()
    for web_name in dict.fromkeys(str(r["web"]) for r in results):
        print(web_name)
        for checkout in checkouts:
            runs = [r for r in results if r["web"] == web_name and r["checkout"] == checkout]
            keys = [key for key in runs[0] if key not in ("checkout", "web", "violations")]
            figures = "  ".join(f"{key} {spread(runs, key)}" for key in keys)
            violations = sum(int(r["violations"]) for r in runs)  # type: ignore[call-overload]
            print(f"  {str(checkout)[-24:]:<24} {figures}  violations {violations}")


if __name__ == "__main__":
    main()
