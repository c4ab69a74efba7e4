"""kill -9 of the driver during a data-parallel trial, then ``--resume``: the trial's ranks
start again from the trial's last checkpoint Tune registered, not from step 0, and the search
finishes with that trial ``ok`` (real processes, 2 gloo ranks)."""

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
STEPS = 400
GLOBAL_BATCH = 16 * 2  # batch 16 on each of 2 workers: a budget in images counts them all
# One trial: the tiny ResNet at batch 16, a report every 16 steps (25 of them), one checkpoint:
# at the first (--checkpoint-every-s is longer than the trial). The kill lands once Tune took a
# later report than the checkpointed one, well before the end. Why one: Tune keeps one
# checkpoint (num_to_keep=1), deletes the older one when it registers a new one, and saves its
# experiment state (which names the checkpoint to resume from) at the end of that loop step
# (ray 2.60 tune_controller.step). A kill -9 inside that step leaves a state naming a deleted
# checkpoint: on a loaded machine every report was a checkpoint (16 steps took over 10 s) and
# CI's kill landed there once ("does not exist on storage anymore"). With one checkpoint the
# later report is a later step, after the save.
SPACE = f"""
from tuner.workloads import RESNET_CPU_TRIAL
WORKLOADS = {{"cpu": {{**RESNET_CPU_TRIAL, "images": {STEPS * GLOBAL_BATCH},
                       "eval_every_images": {16 * GLOBAL_BATCH}}}}}
NUM_SAMPLES = {{"cpu": 1}}

def space(trial, *, cuda):
    return {{"batch_size": trial.suggest_categorical("batch_size", [16]), "lr": 1e-2}}
"""


def _lines(experiment: Path) -> list[dict[str, Any]]:
    found = list(experiment.glob("*/result.json"))
    if not found:
        return []
    return written_reports(found[0])


def _checkpointed_step(experiment: Path) -> int | None:
    """The step of the first checkpointed report Tune took, once Tune took a report after it
    (its experiment state, saved at each checkpoint, holds it by then); None before, or once
    the final report is there (the trial is over: too late to kill it)."""
    lines = _lines(experiment)
    if not lines or lines[-1].get("final"):
        return None
    checkpointed = [line["step"] for line in lines if line.get("checkpoint_dir_name")]
    if checkpointed and lines[-1]["step"] > checkpointed[0]:
        return int(checkpointed[0])
    return None


def _wait_for_a_checkpointed_report(experiment: Path, driver: Any, log: Path) -> int:
    """The step of a checkpoint Tune registered, while the trial trains on."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        if (step := _checkpointed_step(experiment)) is not None:
            return step
        assert driver.poll() is None, log.read_text()[-3000:]
        time.sleep(0.02)
    raise AssertionError("no checkpointed report in time")


def test_a_killed_driver_resumes_its_data_parallel_trial_from_the_checkpoint(
    tmp_path: Path,
) -> None:
    space = tmp_path / "one_trial_space.py"
    space.write_text(SPACE)
    storage, experiment = tmp_path / "experiments", tmp_path / "experiments" / "killed"
    flags = ["--world-size", "2", "--cpus-per-trial", "1", "--speed-repeats", "0",
             "--remeasure-top", "0", "--effects-repeats", "0", "--no-report",
             "--checkpoint-every-s", "3600"]  # fmt: skip
    log = tmp_path / "first.log"  # a file, not a pipe: nobody reads it while the trial runs
    with log.open("w") as out:
        command = search_command(str(space), *flags, name="killed", storage=storage)
        first = subprocess.Popen(command, stdout=out, stderr=out)
        try:
            checkpointed = _wait_for_a_checkpointed_report(experiment, first, log)
        finally:
            _kill_tree(first)
            killed_at = time.time()
    before = [line["step"] for line in _lines(experiment)]
    assert not before or before[-1] < STEPS  # killed mid-trial

    resume = search_command("--resume", "--no-report", name="killed", storage=storage)
    resumed = subprocess.run(resume, capture_output=True, text=True, timeout=TIMEOUT_S)
    out = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, out[-3000:]
    assert "Search finished: 1 trial (1 ok)" in out, out[-3000:]
    lines = _lines(experiment)  # Ray's restore rewrites result.json: what came after the kill
    after = [line["step"] for line in lines if line["reported_unix_s"] > killed_at]
    # From a checkpoint, not from step 0, and mid-trial: it trained again after the resume.
    assert after and checkpointed < min(after) < STEPS
    final = lines[-1]
    assert final["final"] and final["status"] == "ok" and final["steps"] == STEPS
    assert final["world_size"] == 2 and final["images_per_second"] > 0
