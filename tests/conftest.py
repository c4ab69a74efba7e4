"""Shared by every test: the machine cache in a temporary folder; and the checks of the tests
that stop a real search and resume it (local Ray, a cluster)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest

from tuner.cli import main
from tuner.recommend import decide
from tuner.results import load_experiment


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


@pytest.fixture(scope="session", autouse=True)
def _machine_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No test reads or writes the user's cache folder: the speed probes every search of this
    session remembers per machine go to a temporary folder (child processes inherit it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TUNER_CACHE_DIR", str(tmp_path_factory.mktemp("machine_cache")))
        yield


@pytest.fixture
def nothing_lost() -> Callable[[Path, str, Path], None]:
    """:func:`assert_nothing_lost`, for the resume tests of every folder."""
    return assert_nothing_lost
