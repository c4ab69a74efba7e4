"""The tiers hold what README.md promises: the fast tier keeps one real search and the long tier
the other end-to-end paths, CI runs both tiers, and a shared experiment is built once however
many workers ask for it."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tiers import ALSO_READ_AS, DESELECTED, READERS, built_once

ROOT = Path(__file__).resolve().parents[1]
# The end-to-end paths the fast tier keeps (README's test command): one real search, read by
# the report, the browser and the API. The others are the long tier's (tests/tiers.py:
# FAST_CPU), which CI runs after it.
FAST_PATHS = {
    "a real Ray + Optuna search, read by the report": "tests/report/test_report.py::"
    "test_every_file_and_section",
    "a browser render": "tests/report/test_browser.py::test_the_rendered_page_leads_with_the",
    "the API reads a finished search": "tests/test_api.py::"
    "test_load_reads_a_finished_experiment_as_its_report_does",
}
LONG_PATHS = {
    "a data-parallel worker group": "tests/tune/test_ddp_trial.py::"
    "test_one_worker_group_trains_its_trial_and_leaves_nothing_behind",
    "a stalled rank found and its trial retried": "tests/tune/test_stalled_rank.py::"
    "test_a_stopped_rank_is_found_and_its_trial_retried",
    "a kill-and-resume": "tests/tune/test_resume.py::"
    "test_interrupted_search_resumes_without_running_a_finished_trial_twice",
    "every client, every kind": "tests/tune/test_clients.py::test_mlflow_tells_each_kind",
    "nothing fits the memory budget": "tests/report/test_report.py::"
    "test_zero_feasible_experiment_says_why",
    "the picks retrained with seeds": "tests/tune/test_seeds_search.py::"
    "test_the_picks_are_retrained_with_three_seeds_interleaved_and_the_answer_says_so",
    "the picks' seed runs, real training": "tests/compare/test_seeds.py::"
    "test_the_picks_and_the_plain_loop_are_retrained_round_robin_with_new_seeds",
}


def _collected(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n0", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


def _is_slow(tests: dict[str, str], items: list[pytest.Item]) -> dict[str, bool | None]:
    """Whether each path's test is marked slow, read from ``items`` (None: not among them)."""
    return {
        what: next(
            (item.get_closest_marker("slow") is not None
             for item in items if item.nodeid.startswith(test)),
            None,
        )
        for what, test in tests.items()
    }  # fmt: skip


def test_each_end_to_end_path_is_in_its_tier(request: pytest.FixtureRequest) -> None:
    """Read from this run's items (the README's command collects every module, then deselects
    the slow ones); run alone, from a collection of the two tiers' modules."""
    items = [*request.config.stash.get(DESELECTED, []), *request.session.items]
    fast, long = _is_slow(FAST_PATHS, items), _is_slow(LONG_PATHS, items)
    if None in (*fast.values(), *long.values()):  # not all collected here: collect them
        modules = {p.split("::")[0] for p in (*FAST_PATHS.values(), *LONG_PATHS.values())}
        quick = set(_collected("-m", "not slow", *modules))
        every = _collected(*modules)
        fast = {w: not any(t.startswith(p) and t in quick for t in every)
                for w, p in FAST_PATHS.items()}  # fmt: skip
        long = {w: any(t.startswith(p) and t not in quick for t in every)
                for w, p in LONG_PATHS.items()}  # fmt: skip
    assert [what for what, slow in fast.items() if slow] == []
    assert [what for what, slow in long.items() if not slow] == []


def test_ci_runs_the_readme_test_command_then_the_long_tier(tmp_path: Path) -> None:
    """``.ci/run`` with a stand-in for bash's ``-c`` commands: it runs exactly the README's two
    tier commands, in order, and the wheel check between them."""
    ran = tmp_path / "ran"
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "bash").write_text(
        f'#!/bin/sh\nif [ "$1" = "-euo" ]; then echo "$4" >> {ran}; exit 0; fi\n'
        'exec /bin/bash "$@"\n'
    )
    (shim / "bash").chmod(0o755)
    env = {"PATH": f"{shim}:/usr/bin:/bin", "CI": "true", "HOME": str(tmp_path)}
    done = subprocess.run(
        ["/bin/bash", str(ROOT / ".ci" / "run")], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    readme = (ROOT / "README.md").read_text()
    fast, wheel, long = ran.read_text().splitlines()
    assert wheel == ".ci/wheel_check.sh"
    assert fast in readme.split("<!-- test-command -->")[1] and fast.endswith('-m "not slow"')
    assert f"`{long}`" in readme.split("<!-- long-tier-command -->")[1] and long.endswith("-m slow")


def _build_slowly(into: Path) -> None:
    count = into.parent / "builds"
    count.write_text(count.read_text() + "x" if count.exists() else "x")
    time.sleep(0.5)  # long enough for the other process to ask meanwhile
    (into / "result").write_text("built")


def _ask(root: Path) -> None:
    assert (built_once(root, "shared-thing", _build_slowly) / "result").read_text() == "built"


def test_a_shared_experiment_is_built_once_for_every_process_that_asks(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    askers = [context.Process(target=_ask, args=(tmp_path,)) for _ in range(3)]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join(timeout=120)
    assert [asker.exitcode for asker in askers] == [0, 0, 0]
    assert (tmp_path / "shared" / "builds").read_text() == "x"


def test_a_failed_build_is_built_again_by_the_next_to_ask(tmp_path: Path) -> None:
    def broken(into: Path) -> None:
        raise RuntimeError("the search failed")

    with pytest.raises(RuntimeError):
        built_once(tmp_path, "thing", broken)
    assert (built_once(tmp_path, "thing", lambda into: None) / ".built").exists()


_GROUPED = """
import sys
sys.path.insert(0, {tests!r})
import pytest
from tiers import group_machine_tests

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    group_machine_tests(items)
"""
_MODULE = """
import os, time, pytest

@pytest.fixture(scope="module")
def built():
    with open("builds", "a") as f:
        f.write(f"{{os.getpid()}}\\n")
    return 1

@pytest.mark.parametrize("i", range(6))
def test_reads(built, i):
    time.sleep(0.05)
"""


def test_a_module_fixture_is_built_once_under_both_workers(tmp_path: Path) -> None:
    """The grouping the tiers rely on, with the installed pytest and pytest-xdist (pytest 9.2
    made xdist's --dist loadgroup ignore every group, silently: each module fixture was then
    built on both workers, and the whole-machine tests ran two at once)."""
    (tmp_path / "conftest.py").write_text(_GROUPED.format(tests=str(Path(__file__).parent)))
    (tmp_path / "test_shared.py").write_text(_MODULE.format())
    (tmp_path / "test_other.py").write_text("def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    command = [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
               "-p", "no:cacheprovider", "-o", "addopts="]  # fmt: skip
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert len((tmp_path / "builds").read_text().split()) == 1


def test_each_early_build_names_every_module_that_reads_it() -> None:
    """tests/tiers.py's READERS start a shared search when a reader is collected: a module
    that reads one but is missing from its list would wait for a build that never started
    early (it would still build it, late)."""
    for fixture, modules in READERS.items():
        names = (fixture, *ALSO_READ_AS.get(fixture, ()))
        readers = {
            str(path.relative_to(ROOT))
            for path in (ROOT / "tests").rglob("test_*.py")
            if path != Path(__file__).resolve()  # this test names them all
            and any(name in path.read_text() for name in names)
        }
        assert readers == {prefix.split("::")[0] for prefix in modules}, fixture
        for prefix in modules:  # a test named in a prefix exists in its module
            module, _, test = prefix.partition("::")
            assert test.split("[")[0] in (ROOT / module).read_text(), prefix
