"""A space that compares trials at equal wall time: a real search in which every trial of batch
8 or 32 trains the same seconds and reports at equal seconds (so the rungs compare equal time)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from search_cli import search_command

from tuner.experiment import load_experiment

pytestmark = pytest.mark.slow  # a search of its own: Ray, three trials

SPACE = Path(__file__).parent / "spaces" / "equal_time_space.py"


def test_every_trial_trains_the_same_seconds_and_reports_at_equal_seconds(tmp_path: Path) -> None:
    command = search_command(
        str(SPACE), "--no-report", "--seed", "0", "--remeasure-top", "0", "--effects-repeats",
        "0", "--speed-repeats", "0", name="equal-time", storage=tmp_path,
    )  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    experiment = load_experiment(tmp_path / "equal-time")
    trials, curves = experiment.trials, experiment.curves
    assert set(trials["param_batch_size"]) == {8, 32}  # the start-up design covers both
    assert not (trials["kind"] == "starved").any()  # a budget of time plans no steps
    assert trials["planned_steps"].isna().all()
    for trial_id, curve in curves.groupby("trial_id"):
        # The k-th report after k x 1.5 s of training at least, whatever the batch size.
        for k, seconds in enumerate(curve["train_time_s"], start=1):
            assert seconds >= 1.5 * k, (trial_id, list(curve["train_time_s"]))
    finished = trials[trials["kind"] == "ok"]
    assert len(finished) >= 1 and (finished["train_time_s"] >= 3.0).all()
