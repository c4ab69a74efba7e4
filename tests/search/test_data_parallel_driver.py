"""kill -9 of the driver during a data-parallel trial, then ``--resume``: the trial's worker
group starts again from the trial's last checkpoint (Ray Train's, in the trial folder), not from
step 0, and the search finishes with that trial ``ok`` (real processes, 2 gloo workers)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from search_cli import search_command
from test_driver import _kill_tree
from trial_reports import written_reports

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.machine]

TIMEOUT_S = 400
STEPS = 1600
# One trial: the tiny ResNet at batch 16, a checkpointed report every 16 steps: 100 of them,
# tens of seconds of training however fast the machine (the kill must land mid-trial: at 96
# steps a quiet machine finished the trial before the test saw a checkpointed report).
SPACE = f"""
from tuner.workloads import RESNET_CPU_TRIAL
WORKLOADS = {{"cpu": {{**RESNET_CPU_TRIAL, "steps": {STEPS}, "eval_every_steps": 16}}}}
NUM_SAMPLES = {{"cpu": 1}}

def space(trial, *, cuda):
    return {{"batch_size": trial.suggest_categorical("batch_size", [16]), "lr": 1e-2}}
"""


def _lines(experiment: Path) -> list[dict[str, Any]]:
    found = list(experiment.glob("*/result.json"))
    if not found:
        return []
    return written_reports(found[0])


def _wait_for_a_checkpointed_report(experiment: Path, driver: Any, log: Path) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        lines = _lines(experiment)
        if lines and not lines[-1]["final"] and list(experiment.glob("*/train/checkpoint_*")):
            return
        assert driver.poll() is None, log.read_text()[-3000:]
        time.sleep(0.05)
    raise AssertionError("no checkpointed report in time")


def test_a_killed_driver_resumes_its_data_parallel_trial_from_the_checkpoint(
    tmp_path: Path,
) -> None:
    space = tmp_path / "one_trial_space.py"
    space.write_text(SPACE)
    storage, experiment = tmp_path / "experiments", tmp_path / "experiments" / "killed"
    flags = ["--world-size", "2", "--cpus-per-trial", "1", "--speed-repeats", "0",
             "--remeasure-top", "0", "--effects-repeats", "0", "--no-report"]  # fmt: skip
    log = tmp_path / "first.log"  # a file, not a pipe: nobody reads it while the trial runs
    with log.open("w") as out:
        command = search_command(str(space), *flags, name="killed", storage=storage)
        first = subprocess.Popen(command, stdout=out, stderr=out)
        try:
            _wait_for_a_checkpointed_report(experiment, first, log)
        finally:
            _kill_tree(first)
            killed_at = time.time()
    before = [line["step"] for line in _lines(experiment)]
    assert before and before[-1] < STEPS  # killed mid-trial

    resume = search_command("--resume", "--no-report", name="killed", storage=storage)
    resumed = subprocess.run(resume, capture_output=True, text=True, timeout=TIMEOUT_S)
    out = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, out[-3000:]
    assert "Search finished: 1 trials (1 ok)" in out, out[-3000:]
    lines = _lines(experiment)  # Ray's restore rewrites result.json: what came after the kill
    after = [line["step"] for line in lines if line["reported_unix_s"] > killed_at]
    assert after and min(after) > min(before)  # from a checkpoint, not from step 0
    final = lines[-1]
    assert final["final"] and final["status"] == "ok" and final["steps"] == STEPS
    assert final["world_size"] == 2 and final["images_per_second"] > 0
