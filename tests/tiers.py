"""The test tiers and their sharing, spelled once (README: "Tests in tiers").

- ``slow``: the long tier (``pytest -m slow``); the README's test command runs the rest.
- ``machine``: a test that needs the whole machine (a multi-node Ray cluster, a data-parallel
  worker group: one worker per core). pytest-xdist's ``loadgroup`` sends every such test to one
  worker, in turn, so two never run at once; the other worker runs the rest beside them.
- :func:`built_once`: a finished experiment every test reads but none writes is built once per
  test run, by whichever xdist worker asks first, and read by every worker from then on.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

MACHINE = "machine"
MARKERS = {
    "slow": "the long tier: end-to-end runs beyond the fast tier's one search (pytest -m slow)",
    MACHINE: "needs the whole machine (a Ray cluster, a data-parallel worker group): such tests "
    "run one at a time, on one pytest-xdist worker",
}


def run_root(factory: pytest.TempPathFactory) -> Path:
    """The temporary folder of this whole test run: every xdist worker's basetemp is a
    folder of it (``popen-gwN``); without xdist, the basetemp itself."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(root: Path, name: str, build: Callable[[Path], object]) -> Path:
    """``root/shared/name``, filled by ``build`` once in this test run: the first process to
    ask builds it, the others wait for it and read the same folder. A build that raised left
    no mark, so the next to ask builds it again (and fails the same way)."""
    folder = root / "shared" / name
    done = folder / ".built"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder.with_suffix(".lock"))):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed build left, if any
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


# The every-kind search's time budget (tests/conftest.py) must outlast the six short trials, one
# after the other, and end the seventh ("cut": a million steps, waiting on slow data) before
# its first report. The six took 50 s on 2 quiet cores and 93 s beside the long tier; 109-111 s
# of a search alone on 2026-11-28 (another engineer's tests beside it). Inside the fast tier
# they took over 200 s while Ray ran their trials at nice 15 behind the unit tests; at nice 0
# (pytest_configure) 240 s held in four runs (reports/benchmarks/fast_tier.md: three, and the
# three-worker run it names; 200 s had not, at nice 15). When the first
# budget ended a short trial too (what the search did decides, not a clock), a second search
# has room for a machine several times slower (under coverage beside a CPU hog the first
# trial alone took over 2 minutes).
EVERY_KIND_TIME_BUDGETS_S = (240, 900)
SEARCH_END_SLACK_S = 300  # a search's start-up and end beyond its time budget
# How long a test may wait for an early build (pytest-timeout counts the wait): every attempt
# of the every-kind search, each to its subprocess timeout, and a margin.
EARLY_BUILD_WAIT_S = sum(b + SEARCH_END_SLACK_S for b in EVERY_KIND_TIME_BUDGETS_S) + 300


# FAST_CPU: what the fast tier can hold. README's test command has 6 minutes on 2 cores; the
# run is CPU-bound (2026-11-28, each xdist worker and the controller in a cgroup of its own,
# every process they started counted, Ray's workers too: 1,112 CPU-seconds in 681 s, both cores
# 82 % busy). So it holds about 600 CPU-seconds: the unit tests (about 450) and one real search
# read by the report, the browser, the API and the CLI (the smoke search, 75-80). Each other
# end-to-end path starts its own Ray, drivers and trial processes (each process imports torch
# and timm: about 10 CPU-seconds) and runs in the long tier, which CI runs too: every client for
# every kind of trial (170), a kill-and-resume (120), a data-parallel worker group (100), the
# nothing-fits search (50), a second cluster node, two processes building one folder.
# reports/benchmarks/fast_tier.md has the figures, test by test.

# The tests that read each shared search (tests/conftest.py's fixtures, by name;
# ``partial_experiment`` is a copy of the smoke one), as node-id prefixes (a module, or one
# test of it): pytest-xdist's controller starts a search as soon as one of its readers is
# collected (EarlyBuild), so a search whose readers the tier deselects never starts.
# tests/test_tiers.py checks the lists.
READERS: dict[str, tuple[str, ...]] = {
    "smoke_experiment": (
        "tests/cli/test_flags.py", "tests/experiment/test_load.py",
        "tests/report/test_browser.py", "tests/report/test_honest.py",
        "tests/report/test_report.py", "tests/report/test_speed_claims.py", "tests/test_api.py",
        "tests/test_time_to_target.py",
        "tests/tune/test_driver.py",
        "tests/tune/test_usage_errors.py",
    ),
    "infeasible_experiment": (
        "tests/report/test_browser.py::test_over_budget_trials_are_drawn_marked_apart",
        "tests/report/test_report.py::test_zero_feasible_experiment_says_why",
        "tests/report/test_report.py::test_trials_csv_reads_back_as_the_parquet_file"
        "[infeasible_experiment]",
    ),
    "every_kind_experiment": ("tests/tune/test_clients.py",),
}  # fmt: skip
ALSO_READ_AS = {"smoke_experiment": ("partial_experiment",)}


class EarlyBuild:
    """A shared experiment whose build is mostly waiting (a search: Ray's start, each trial's
    process start, the every-kind search's time budget), started by pytest-xdist's controller
    in a thread as soon as the workers have collected one of its ``readers`` (node-id
    prefixes), so that the wait overlaps the other tests instead of delaying the tests that read
    it (a smoke search alone: 70-76 s of wall time, 73-81 CPU-seconds, every process counted).
    Without xdist, the fixture builds it when first asked."""

    def __init__(self, name: str, readers: tuple[str, ...], build: Callable[[Path], object]):
        self.name, self.readers, self.build = name, readers, build
        self.thread: threading.Thread | None = None

    def start_if_collected(self, config: pytest.Config, ids: list[str]) -> None:
        if self.thread is not None or not any(i.startswith(self.readers) for i in ids):
            return
        root = config._tmp_path_factory.getbasetemp()  # the workers' basetemps are its folders
        self.thread = threading.Thread(
            target=built_once, args=(root, self.name, self.build), daemon=True
        )
        self.thread.start()

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()


DESELECTED = pytest.StashKey[list[pytest.Item]]()  # what this run's -m left out


def remember_deselected(items: list[pytest.Item]) -> None:
    """Keep what ``-m`` deselected on the config, so a test can read a test's markers without
    collecting again (tests/test_tiers.py)."""
    if items:
        items[0].config.stash.setdefault(DESELECTED, []).extend(items)


def readers_last(items: list[pytest.Item]) -> None:
    """The tests that read a shared search after the others (a stable sort): pytest-xdist hands
    out tests in this order (``--no-loadscope-reorder``: by default it hands out the largest
    groups first), so the workers run the rest while the search builds instead of waiting on it
    (the report's and the browser's tests waited 55 s and 28 s in a run of 2026-11-28 that
    handed them out first)."""
    names = {*READERS, *(alias for aliases in ALSO_READ_AS.values() for alias in aliases)}
    items.sort(key=lambda item: bool(names & set(getattr(item, "fixturenames", ()))))


def add_markers(config: pytest.Config) -> None:
    for name, meaning in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")


def group_machine_tests(items: list[pytest.Item]) -> None:
    """Every ``machine`` test into one xdist group; a module whose tests share a
    module-scoped fixture stays on one worker too, so that fixture is built once."""
    for item in items:
        if item.get_closest_marker(MACHINE) is not None:
            item.add_marker(pytest.mark.xdist_group(MACHINE))
        elif _shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs[-1].scope == "module" for defs in info.name2fixturedefs.values() if defs)
