"""Real, small experiments made by the real ``tuner search`` (no hand-written numbers)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def run_search(storage: Path, name: str, *extra: str) -> Path:
    """``python -m tuner search smoke_space`` in a subprocess (its own Ray), report off."""
    command = [
        sys.executable,
        "-m",
        "tuner",
        "search",
        "smoke_space",
        "--name",
        name,
        "--storage",
        str(storage),
        "--no-report",
        "--seed",
        "0",
        *extra,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=400)
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    return storage / name


@pytest.fixture(scope="session")
def smoke_experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 3-trial search on the smoke space: two candidates re-measured twice, and the
    technique effects around the recommended config measured twice."""
    storage = tmp_path_factory.mktemp("experiments")
    return run_search(
        storage, "smoke", "--num-samples", "3", "--remeasure-top", "2", "--remeasure-repeats",
        "2", "--remeasure-max-repeats", "2", "--effects-repeats", "2",
    )  # fmt: skip


@pytest.fixture(scope="session")
def infeasible_experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real search whose memory budget (1 KB) no trial can meet."""
    storage = tmp_path_factory.mktemp("experiments")
    return run_search(
        storage, "nothing-fits", "--num-samples", "2", "--max-memory", "1KB", "--remeasure-top", "0"
    )


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
