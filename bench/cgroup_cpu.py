"""A pytest plugin: each test's CPU-seconds in a run on pytest-xdist's workers, every process the
test started counted (its subprocesses, a search's driver, Ray's daemons and workers).

    PYTHONPATH=bench TUNER_CGROUP_CPU=/tmp/cpu.jsonl \\
        .venv/bin/python -m pytest -p cgroup_cpu -m "not slow"

Each xdist worker (and the controller, which builds the shared searches early: tests/tiers.py)
moves itself into a cgroup of its own (cgroup v1's ``cpuacct``, under
``/sys/fs/cgroup/cpuacct/``; it needs the right to make one, as root in a container has).
A process a test starts is born in its worker's cgroup, and so is every process that one
starts, Ray's raylet and its workers included, so the cgroup's usage counts them, even after
they exit. A test's cost is its worker's usage over the test (setup, call, teardown), whatever
else the machine runs beside it: unlike bench/cpu_per_test.py, it needs neither ``-n0`` nor a
quiet machine. Each test appends one JSON line (``id``, ``worker``, ``cpu_s``, ``wall_s``,
``start_s``) to ``$TUNER_CGROUP_CPU``; the controller appends its whole usage (``id``:
``controller``) at the end. Without the variable set, the plugin does nothing.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ENV = "TUNER_CGROUP_CPU"
ROOT = Path("/sys/fs/cgroup/cpuacct")
_KEY = pytest.StashKey[Path]()


def _worker(config: pytest.Config) -> str | None:
    """This process's xdist worker id; None in the controller (or a run without xdist)."""
    workerinput = getattr(config, "workerinput", None)
    return None if workerinput is None else str(workerinput["workerid"])


def _group(config: pytest.Config) -> Path:
    """The run's folder is named for the controller's pid: each worker is its child."""
    worker = _worker(config)
    run = f"tuner-tests-{os.getppid() if worker else os.getpid()}"
    return ROOT / run / (worker or "controller")


def _usage_s(group: Path) -> float:
    return int((group / "cpuacct.usage").read_text()) / 1e9


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get(ENV):
        return
    group = _group(config)
    group.mkdir(parents=True, exist_ok=True)
    (group / "cgroup.procs").write_text(str(os.getpid()))  # every thread, and what it starts
    config.stash[_KEY] = group


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    group = item.config.stash.get(_KEY, None)
    if group is None:
        yield
        return
    cpu, start = _usage_s(group), time.monotonic()
    yield
    row = {
        "id": item.nodeid,
        "worker": _worker(item.config) or "-",
        "cpu_s": round(_usage_s(group) - cpu, 2),
        "wall_s": round(time.monotonic() - start, 2),
        "start_s": round(start, 2),
    }
    _append(row)


def pytest_unconfigure(config: pytest.Config) -> None:
    group = config.stash.get(_KEY, None)
    if group is not None and _worker(config) is None:
        _append({"id": "controller", "cpu_s": round(_usage_s(group), 2)})


def _append(row: dict[str, object]) -> None:
    with open(os.environ[ENV], "a") as out:  # one short line per write: whole under O_APPEND
        out.write(json.dumps(row) + "\n")
