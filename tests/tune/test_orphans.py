"""kill -9 of a real driver leaves Ray's agents running (reparented to init); the next command on
the experiment (here ``tuner report``; ``--resume`` calls the same) ends them by the PIDs the
driver recorded."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from search_cli import search_command

from tuner.experiment.lock import HELPERS_KEY

pytestmark = pytest.mark.slow

SPACE = Path(__file__).parent / "spaces" / "resume_space.py"
TIMEOUT_S = 300


def _alive(recorded: list[dict]) -> list[psutil.Process]:
    alive = []
    for entry in recorded:
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(entry["pid"])
            same = abs(process.create_time() - entry["started"]) < 0.01
            if same and process.status() != psutil.STATUS_ZOMBIE:  # a zombie has ended
                alive.append(process)
    return alive


def test_the_next_command_ends_what_a_killed_driver_left(tmp_path: Path) -> None:
    storage = tmp_path / "experiments"
    command = search_command(
        str(SPACE), "--num-samples", "3", "--no-report", name="killed", storage=storage
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    recorded: list[dict] = []
    try:
        assert driver.stdout is not None
        deadline = time.monotonic() + TIMEOUT_S
        for line in driver.stdout:  # a trial started: Ray and its agents are up
            if "] start " in line:
                break
            assert time.monotonic() < deadline, "no trial started in time"
        metadata = json.loads((storage / "killed" / "tuner_experiment.json").read_text())
        recorded = metadata[HELPERS_KEY]
        assert {"raylet", "gcs_server"} <= {entry["name"] for entry in recorded}
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=60)
        time.sleep(5)  # what dies with the driver has died by now
        left = _alive(recorded)
        report = subprocess.run(
            [sys.executable, "-m", "tuner", "report", str(storage / "killed"), "--out",
             str(tmp_path / "report")],
            capture_output=True, text=True, timeout=TIMEOUT_S,
        )  # fmt: skip
        assert report.returncode == 0, report.stderr[-2000:]
        assert not _alive(recorded)
        # Ray 2.60 leaves its DashboardAgent and RuntimeEnvAgent; each is named where ended. One
        # may still end by itself between the look above and the report: what the report names
        # is what it ended, each a process the driver recorded.
        ended = [line for line in report.stderr.splitlines() if line.startswith("Ended ")]
        named = {int(pid) for line in ended for pid in re.findall(r"\((\d+)\)", line)}
        assert named <= {entry["pid"] for entry in recorded}, report.stderr
        assert named or not left, report.stderr
        said = f"Ended {len(named)} process(es) a killed driver of 'killed' left running: "
        assert not named or said in report.stderr, report.stderr
    finally:
        driver.kill()
        for process in _alive(recorded):
            process.kill()
