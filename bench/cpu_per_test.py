"""A pytest plugin: the machine's busy CPU-seconds over each test (bench/tier_bench.py).

Loaded with ``-p cpu_per_test`` in a run without xdist (``-n0``), so one test runs at a time:
the busy CPU time of the whole machine between a test's start (its setup, module fixtures
included) and its end (teardown) is then that test's cost, every process it started counted,
Ray's daemons and workers, subprocesses and orphans alike, which a per-process count would
miss. What else the machine ran in that time counts too: the bench measures that background
apart, before and after each tier. On a machine whose cores other work already fills, a test's
work only displaces it, and the count says nothing of the test: run it on a quiet machine.
Each test appends one JSON line to the file ``$TUNER_CPU_PER_TEST``; without it set, the
plugin does nothing.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

ENV = "TUNER_CPU_PER_TEST"


def spent_seconds(before: Any, after: Any) -> tuple[float, float]:
    """The machine's CPU-seconds in all and not idle, over every core, between two
    ``psutil.cpu_times()``."""
    spent = {field: getattr(after, field) - getattr(before, field) for field in after._fields}
    # Linux counts guest time inside user and nice already: not twice.
    total = sum(v for k, v in spent.items() if k not in ("guest", "guest_nice"))
    return total, total - spent["idle"] - spent.get("iowait", 0.0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Around the whole protocol, not the call alone: a module fixture's search runs in the
    setup of its first test, and the last test's teardown ends the session's fixtures."""
    out = os.environ.get(ENV)
    cpu, start = psutil.cpu_times(), time.perf_counter()
    yield
    if not out:
        return
    line = {
        "test": item.nodeid,
        "cpu_s": round(spent_seconds(cpu, psutil.cpu_times())[1], 2),
        "wall_s": round(time.perf_counter() - start, 2),
    }
    with open(out, "a") as file:
        file.write(json.dumps(line) + "\n")
