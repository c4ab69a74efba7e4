"""Shared by every test: the machine cache in a temporary folder. Real, small experiments made
by the real ``tuner search`` (no hand-written numbers), shared by the experiment, report and
search tests; checks shared by the tests that stop a real search and resume it (local Ray, a
cluster)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from search_cli import search_command
from tiers import (
    EVERY_KIND_TIME_BUDGETS_S,
    READERS,
    SEARCH_END_SLACK_S,
    EarlyBuild,
    add_markers,
    built_once,
    group_machine_tests,
    readers_last,
    remember_deselected,
    run_root,
)

from tuner import usercode
from tuner.answer import decide
from tuner.commands import main
from tuner.experiment import load_experiment
from tuner.record import KINDS


def console_front(stdout: str) -> list[str]:
    """The trial ids of the Pareto front a search printed (each front line starts with one)."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Pareto front"))
    front = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        front.append(line.split(":", 1)[0].strip())
    return front


def assert_nothing_lost(experiment: Path, stdout: str, out: Path) -> None:
    """Every trial with a final report has that report's status in the report's trials.csv
    (none shown as incomplete), and the report decides the front the console printed, however
    the modification times of Ray's state files fall (equal, or the older file touched last)."""
    finals = _final_statuses(experiment)
    assert finals
    states = sorted(experiment.glob("experiment_state-*.json"))
    assert len(states) >= 2, "a resumed experiment has the first run's state file too"
    stamp = states[-1].stat().st_mtime
    for older_offset in (0, 1):
        for state in states:
            os.utime(state, (stamp, stamp + (older_offset if state != states[-1] else 0)))
        assert main(["report", str(experiment), "--out", str(out)]) == 0
        trials = pd.read_csv(out / "trials.csv", dtype={"trial_id": str})
        shown = dict(zip(trials["trial_id"], trials["status"], strict=True))
        assert {tid: shown.get(tid) for tid in finals} == finals  # none shown as incomplete
        front = decide(load_experiment(experiment)).front["trial_id"].head(5).tolist()
        assert front == console_front(stdout)


def _final_statuses(experiment: Path) -> dict[str, str]:
    """trial id -> status, for the trials whose result.json ends with their final report."""
    finals = {}
    for file in experiment.glob("*/result.json"):
        last = json.loads(file.read_text().splitlines()[-1])
        if last.get("final"):
            finals[last["trial_id"]] = last["status"]
    return finals


def pytest_configure(config: pytest.Config) -> None:
    add_markers(config)
    # The trials of the tests' searches at the priority of the tests beside them. Ray starts
    # its workers at nice 15 (RAY_worker_niceness): beside two pytest workers at nice 0 a
    # search's trials then wait for a core the tests rarely leave, and the search (which the
    # tests reading it wait for) took 2-3 times as long as alone.
    os.environ.setdefault("RAY_worker_niceness", "0")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # One compute thread per xdist worker: two workers already fill the two cores, and
        # torch's OpenMP threads spin while they wait for a core. In a run beside the tier's
        # searches and another engineer's tests, a training test of 2-5 s alone took 144 s
        # with torch's default of one per core. Only under xdist: -n0 keeps torch's default.
        # (A trial sets its own threads: tuner.tune.trainable.)
        import torch

        torch.set_num_threads(1)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: none without it (-p no:xdist)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """pytest-xdist's controller: start each shared search (most of it waits: Ray's start, a
    trial's process start, the every-kind search's time budget) as soon as a worker collected
    a test that reads it, so the waits overlap the other tests."""
    if not any(early.thread for early in EARLY_BUILDS):  # the controller's own cache folder
        cache = node.config._tmp_path_factory.getbasetemp() / "machine_cache_early"
        os.environ["TUNER_CACHE_DIR"] = str(cache)  # as each worker's (_machine_cache_dir)
    for early in EARLY_BUILDS:
        early.start_if_collected(node.config, ids)


def pytest_unconfigure(config: pytest.Config) -> None:
    for early in EARLY_BUILDS:
        early.join()  # no search of ours outlives the run


def pytest_deselected(items: list[pytest.Item]) -> None:
    remember_deselected(items)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    readers_last(items)
    group_machine_tests(items)


@pytest.fixture(scope="session", autouse=True)
def _machine_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No test reads or writes the user's cache folder: the speed probes every search of this
    session remembers per machine go to a temporary folder (child processes inherit it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TUNER_CACHE_DIR", str(tmp_path_factory.mktemp("machine_cache")))
        yield


@pytest.fixture(autouse=True)
def _notebook_objects_stay_in_their_test() -> Iterator[None]:
    """A notebook object a test hands to tuner.search (a class of a test module) stays
    registered in this process (as in a notebook); the next in-process search would ship it to
    its Ray workers, which cannot import that test module. Each test starts from the registry
    it found."""
    before = usercode.registered()
    yield
    usercode._REGISTERED.clear()
    usercode.restore(before)


@pytest.fixture
def nothing_lost() -> Callable[[Path, str, Path], None]:
    """:func:`assert_nothing_lost`, for the resume tests of every folder."""
    return assert_nothing_lost


def run_search(storage: Path, name: str, *extra: str) -> Path:
    """``python -m tuner search smoke_space`` in a subprocess (its own Ray), report off."""
    command = search_command(
        "smoke_space", "--no-report", "--seed", "0", *extra, name=name, storage=storage
    )
    done = subprocess.run(command, capture_output=True, text=True, timeout=400)
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    return storage / name


@pytest.fixture(scope="session")
def smoke_experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 3-trial search on the smoke space: two candidates re-measured twice, and the
    technique effects around the recommended config measured twice. Built once per test run
    (tests/tiers.py): read it, never write into it (copy it first)."""
    return built_once(run_root(tmp_path_factory), SMOKE, _smoke) / SMOKE


SMOKE = "smoke"


def _smoke(storage: Path) -> None:
    repeats = ["--remeasure-repeats", "2", "--remeasure-max-repeats", "2", "--effects-repeats", "2"]
    run_search(storage, SMOKE, "--num-samples", "3", "--remeasure-top", "2", *repeats)


@pytest.fixture(scope="session")
def infeasible_experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real search whose memory budget no trial can meet: just above the 497 KB the micro ViT's
    weights, gradients and AdamW moments take (a budget below that is refused before Ray).
    Built once, read-only."""
    return built_once(run_root(tmp_path_factory), NOTHING_FITS, _nothing_fits) / NOTHING_FITS


NOTHING_FITS = "nothing-fits"


def _nothing_fits(storage: Path) -> None:
    extra = ["--num-samples", "2", "--max-memory", "500KB", "--remeasure-top", "0"]
    run_search(storage, NOTHING_FITS, *extra)


EVERY_KIND_SPACE = Path(__file__).parent / "tune" / "spaces" / "clients_space.py"
EVERY_KIND_MAX_FAILURES = 1  # Ray retries an errored trial once: the retry must raise at once
EVERY_KIND_NAME = "every-kind"
EVERY_KIND_SAMPLES = 7  # spaces/clients_space.py: one trial of each variant


@pytest.fixture(scope="session")
def every_kind_experiment(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One search with a trial of every kind (``spaces/clients_space.py``: ok, stopped early,
    over budget, diverged, errored as bad input, errored inside the engine, and incomplete: cut
    by ``--search-time-budget-s``), tracked with MLflow (a SQLite store) and W&B (offline),
    built once per test run (tests/tiers.py: read it, never write into it): its ``experiment``
    folder, ``uri`` (MLflow), ``variants`` (trial id -> variant), ``name``, ``max_failures``
    and the CLI's ``stdout`` and ``stderr``."""
    name = EVERY_KIND_NAME
    root = built_once(run_root(tmp_path_factory), name, _every_kind)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    experiment = root / "experiments" / name
    trial_dirs = (p.parent for p in experiment.glob("*/params.json"))
    variants = {
        d.name.split("_")[1]: json.loads((d / "params.json").read_text()) for d in trial_dirs
    }
    return {
        "experiment": experiment,
        "uri": uri,
        "name": name,
        "max_failures": EVERY_KIND_MAX_FAILURES,
        "variants": {trial_id: params["variant"] for trial_id, params in variants.items()},
        "stdout": (root / "stdout.txt").read_text(),
        "stderr": (root / "stderr.txt").read_text(),
    }


def _every_kind(root: Path, name: str = EVERY_KIND_NAME) -> None:
    """The every-kind search through the CLI into ``root`` (its console kept beside it): with
    the first time budget, or, when that ended a trial other than ``cut``, again with the next."""
    for budget in EVERY_KIND_TIME_BUDGETS_S:
        shutil.rmtree(root)  # a search too short for this machine, if any
        root.mkdir()
        done = _every_kind_search(root, name, budget)
        if _only_cut_was_cut(done.stdout):
            break
    else:
        raise AssertionError(
            f"even a {budget} s time budget ended a trial other than 'cut': " + done.stdout[-3000:]
        )
    (root / "stdout.txt").write_text(done.stdout)
    (root / "stderr.txt").write_text(done.stderr)


def _every_kind_search(root: Path, name: str, budget_s: int) -> subprocess.CompletedProcess[str]:
    command = search_command(
        str(EVERY_KIND_SPACE), "--no-report", "--seed", "0",
        "--num-samples", str(EVERY_KIND_SAMPLES), "--concurrency", "1", "--max-memory", "220MiB",
        "--max-failures", str(EVERY_KIND_MAX_FAILURES), "--speed-repeats", "0",
        "--probe-steps", "3", "--remeasure-top", "0", "--effects-repeats", "0",
        "--search-time-budget-s", str(budget_s),
        "--mlflow", f"sqlite:///{root / 'mlflow.db'}", "--wandb", "tuner-test",
        name=name, storage=root / "experiments",
    )  # fmt: skip
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("WANDB_")},
           "WANDB_MODE": "offline"}  # fmt: skip
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=budget_s + SEARCH_END_SLACK_S,
        cwd=root,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _only_cut_was_cut(stdout: str) -> bool:
    """Whether every trial started and the time budget left only ``cut`` incomplete (the
    console's start and end lines: ``] start  ID  ... variant=V``, ``] KIND  ID  ...``)."""
    started = {m[1]: m[2] for m in re.finditer(r"\] start  (\w+)  .*variant=(\w+)", stdout)}
    kinds = "|".join(map(re.escape, KINDS))
    ended = {m[2]: m[1] for m in re.finditer(rf"\] ({kinds})\s+(\w+)  ", stdout)}
    incomplete = {started.get(tid) for tid, kind in ended.items() if kind == "incomplete"}
    return len(started) == EVERY_KIND_SAMPLES and incomplete == {"cut"}


@pytest.fixture
def partial_experiment(smoke_experiment: Path, tmp_path: Path) -> Path:
    """The smoke experiment as if interrupted: one trial never wrote its result."""
    copy = tmp_path / "smoke"
    shutil.copytree(smoke_experiment, copy)
    result = sorted(copy.glob("*/result.json"))[-1]
    result.unlink()
    (copy / "remeasure.csv").unlink(missing_ok=True)
    (copy / "effects.csv").unlink(missing_ok=True)
    return copy


EARLY_BUILDS = (
    EarlyBuild(EVERY_KIND_NAME, READERS["every_kind_experiment"], _every_kind),
    EarlyBuild(SMOKE, READERS["smoke_experiment"], _smoke),
    EarlyBuild(NOTHING_FITS, READERS["infeasible_experiment"], _nothing_fits),
)
