"""A pytest plugin: the machine's busy CPU-seconds over each test (bench/tier_bench.py).

Loaded with ``-p cpu_per_test`` in a run without xdist (``-n0``), so one test runs at a time:
the busy CPU time of the whole machine between a test's start (its setup, module fixtures
included) and its end (teardown) is then that test's cost, every process it started counted,
Ray's daemons and workers, subprocesses and orphans alike, which a per-process count would
miss. What else the machine ran in that time counts too: the bench measures that background
apart, before the run. Each test appends one JSON line to the file ``$TUNER_CPU_PER_TEST``.
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


def busy_seconds(before: Any, after: Any) -> float:
    """The machine's CPU-seconds not idle between two ``psutil.cpu_times()`` (all cores)."""
    spent = {field: getattr(after, field) - getattr(before, field) for field in after._fields}
    # Linux counts guest time inside user and nice already: not twice.
    total = sum(v for k, v in spent.items() if k not in ("guest", "guest_nice"))
    return total - spent["idle"] - spent.get("iowait", 0.0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    cpu, start = psutil.cpu_times(), time.perf_counter()
    yield
    line = {
        "test": item.nodeid,
        "cpu_s": round(busy_seconds(cpu, psutil.cpu_times()), 2),
        "wall_s": round(time.perf_counter() - start, 2),
    }
    with open(os.environ[ENV], "a") as out:
        out.write(json.dumps(line) + "\n")
