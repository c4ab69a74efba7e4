"""An interrupted search (a real Ctrl-C to the CLI) resumes to completion, no trial run twice."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest

pytestmark = pytest.mark.slow

SPACE = Path(__file__).parent / "spaces" / "resume_space.py"
SAMPLES = 3
TIMEOUT_S = 300
FINISHED_LINE = re.compile(r"^\[[^\]]*\]\s+(?P<event>[\w-]+)\s+(?P<trial_id>\w+)\s")


def _cli(tmp_path: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "tuner", "search", *extra, "--name", "resumed",
        "--storage", str(tmp_path / "experiments"), "--no-report", "--remeasure-top", "0",
        "--no-early-stopping", "--effects-repeats", "0", "--speed-repeats", "1",
    ]  # fmt: skip


def _records(exp: Path) -> dict[str, list[dict[str, Any]]]:
    records = {}
    for path in exp.glob("*/result.json"):
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if lines:
            records[lines[0]["trial_id"]] = lines
    return records


def _interrupt_after_first_trial(tmp_path: Path) -> tuple[list[str], int]:
    driver = subprocess.Popen(
        _cli(tmp_path, str(SPACE), "--num-samples", str(SAMPLES)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    finished: list[str] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        assert driver.stdout is not None
        for line in driver.stdout:
            match = FINISHED_LINE.match(line)
            if match and match["event"] != "start":
                finished.append(match["trial_id"])
                driver.send_signal(signal.SIGINT)  # Ctrl-C, as a user would
                break
            assert time.monotonic() < deadline, "no trial finished in time"
        driver.communicate(timeout=TIMEOUT_S)
    finally:
        driver.kill()
    return finished, driver.returncode


def test_interrupted_search_resumes_without_running_a_finished_trial_twice(
    tmp_path: Path,
) -> None:
    exp = tmp_path / "experiments" / "resumed"
    finished, returncode = _interrupt_after_first_trial(tmp_path)
    assert finished and returncode != 0
    meta = json.loads((exp / "tuner_experiment.json").read_text())
    assert meta["state"] == "interrupted"
    before = _records(exp)
    done_before = {tid: lines for tid, lines in before.items() if lines[-1].get("final")}
    assert set(finished) <= set(done_before)
    assert len(done_before) < SAMPLES  # the search really was cut short

    resumed = subprocess.run(
        _cli(tmp_path, "--resume"), capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert "Experiment folder:" in resumed.stdout

    after = _records(exp)
    assert len(after) == SAMPLES
    assert all(lines[-1]["status"] == "ok" and lines[-1]["final"] for lines in after.values())
    for trial_id, lines in done_before.items():  # finished trials were not trained again
        assert after[trial_id] == lines
    assert json.loads((exp / "tuner_experiment.json").read_text())["state"] == "finished"

    study = optuna.load_study(study_name="resumed", storage=f"sqlite:///{exp / 'study.db'}")
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    ray_ids = [t.user_attrs["ray_trial_id"] for t in complete]
    assert sorted(ray_ids) == sorted(after)  # one Optuna trial per Ray trial, none twice
    assert not [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
