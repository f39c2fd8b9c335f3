"""The recrawl policy's Lua form (crawler/policy/lua/revisit.lua, run where the URL record is written) against
its Python reference (crawler/policy/recrawl.py plan_revisit), on a real redis-server: the same next visit and
front-queue level for the same history, signals and policy."""

from __future__ import annotations

import math
import random

import pytest

from crawler.crawlstate.library import compose
from crawler.frontier.levels import PriorityLevels
from crawler.policy.priority import DEFAULT_WEIGHTS, HostQuality, PriorityPolicy, PrioritySignals
from crawler.policy.recrawl import ChangeHistory, RecrawlPolicy, plan_revisit, revisit_terms
from tests.conftest import RedisServer

_PLAN = compose("#!lua", """
local t = revisit_terms(ARGV[1])
local due, level, fraction = revisit_plan(t, tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]),
                                tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]),
                                tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12]))
return {fmt(due), level, string.format('%.6f', fraction)}
""")

_POLICIES = [
    (RecrawlPolicy(), PriorityPolicy(), PriorityLevels(4)),
    (RecrawlPolicy(min_interval=60.0, max_interval=7 * 86400.0, initial_interval=3600.0, change_fraction=0.25,
                   importance_boost=3.0),
     PriorityPolicy(weights={**DEFAULT_WEIGHTS, "inlinks": 0.7, "depth": -0.4, "change_rate": 1.5,
                             "host_error_rate": -3.0, "host_near_dup_rate": -2.5, "host_importance": 2.0},
                    minimum=-3, maximum=3, min_host_pages=5),
     PriorityLevels(6, default_level=2)),
    (RecrawlPolicy(importance_boost=0.0), PriorityPolicy(maximum=0, minimum=-1), PriorityLevels(2, 0)),
]


def _cases(rng: random.Random) -> list[tuple[int, int, int, float, int, int, int, float, int, int, int]]:
    cases = []
    for _ in range(400):
        now = 1_000_000 + rng.random() * 5e7
        observations = rng.choice([0, 1, 2, 3, 10, rng.randrange(0, 65536)])
        changes = rng.randrange(0, observations + 2)
        first = int(now - rng.random() * 3e7) if observations else 0
        previous = rng.choice([0, int(now - rng.random() * 1e6), int(now)])
        pages = rng.choice([0, 3, 20, rng.randrange(0, 100_000)])
        errors = rng.randrange(0, pages + 1)
        near = rng.randrange(0, pages - errors + 1)
        cases.append((observations, changes, first, now, previous, rng.randrange(0, 30),
                       rng.choice([0, 1, 7, 255]), rng.choice([0.0, 0.5, 1.0, rng.random()]), pages, errors, near))
    return cases


@pytest.mark.parametrize("which", range(len(_POLICIES)))
def test_lua_plans_as_python_does(redis_server: RedisServer, which: int) -> None:
    recrawl, priority, levels = _POLICIES[which]
    terms = revisit_terms(recrawl, priority, levels.levels, levels.default_level)
    client = redis_server.client()
    script = client.register_script(_PLAN)
    differences = []
    cases = _cases(random.Random(which))
    for observations, changes, first, now, previous, depth, inlinks, importance, pages, errors, near in cases:
        history = ChangeHistory(observations, changes, float(first), now)
        signals = PrioritySignals(depth=depth, inlinks=inlinks, host_importance=importance,
                                  host=HostQuality(pages, errors, near))
        plan = plan_revisit(recrawl, priority, history, previous or None, signals)
        expected = (int(plan.due), levels.level(plan.priority))
        due, level, fraction = script(args=[terms, observations, changes, first, repr(now), previous, depth,
                                            inlinks, repr(importance), pages, errors, near])
        # The due time's fraction of a second (the recrawl schedule's order within a second).
        if abs(float(fraction) - (plan.due - int(plan.due))) > 1e-5:
            differences.append(("fraction", now, plan.due, float(fraction)))
        if (int(due), int(level)) != expected:
            differences.append((observations, changes, first, now, previous, expected, (int(due), int(level))))
    assert not differences, differences[:5]
    # The cases reach every branch: no history, a history without changes, a change rate; clamps at both ends.
    dues = [int(plan_revisit(recrawl, priority, ChangeHistory(o, c, float(f), n), p or None,
                             PrioritySignals(depth=d, inlinks=i, host_importance=h,
                                             host=HostQuality(pg, e, nd))).due - n)
            for o, c, f, n, p, d, i, h, pg, e, nd in cases]
    assert len(set(dues)) > 20


def test_terms_refused_when_malformed(redis_server: RedisServer) -> None:
    import redis

    client = redis_server.client()
    with pytest.raises(redis.exceptions.ResponseError, match="16 numbers expected"):
        client.eval(_PLAN, 0, "1 2 3", *["0"] * 11)
    assert math.isfinite(float(revisit_terms(RecrawlPolicy(), PriorityPolicy(), 4, 1).split()[0]))
