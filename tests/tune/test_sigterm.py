"""SIGTERM (what SLURM, Kubernetes and systemd send) to a real driver is taken as Ctrl-C, in
Ray's start (of a new search and of a resume), the search, the re-measurement and the technique
effects (in the checks before Ray: tests/tune/test_usage_errors.py): the trials stopped and
saved, the summary and the exact resume command printed, the state recorded, exit code 143.
The last ``--resume`` keeps the re-measurement an earlier run finished on the same trials
instead of measuring it again."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import optuna
import psutil
import pytest
from optuna.trial import TrialState
from search_cli import search_command

from tuner.errors import EXIT_TERMINATED
from tuner.experiment import STUDY_TRIAL_ID_ATTR, load_experiment
from tuner.record import KIND, TRIAL_ID

pytestmark = pytest.mark.slow

SPACE = Path(__file__).parent / "spaces" / "resume_space.py"
TIMEOUT_S = 300
TRIAL_ENDED = r"^\[\s*\d+/\S+ [^\]]*\] ok\s"
RESUME = "Continue it with:  python -m tuner search --resume --name termed"


def _cli(tmp_path: Path, *extra: str) -> list[str]:
    return search_command(*extra, name="termed", storage=tmp_path / "experiments")


def _terminate_at(command: list[str], wanted: str) -> tuple[int, str]:
    """Run ``command``; at its first line matching ``wanted``, SIGTERM to the driver alone (as
    ``kill PID`` or Kubernetes sends it); its exit code and output."""
    driver = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    seen: list[str] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        assert driver.stdout is not None
        for line in driver.stdout:
            seen.append(line)
            if re.search(wanted, line):
                driver.send_signal(signal.SIGTERM)
                break
            assert time.monotonic() < deadline, f"no line matching {wanted!r} in time"
        rest, _ = driver.communicate(timeout=TIMEOUT_S)
    finally:
        driver.kill()
    return driver.returncode, "".join(seen) + rest


def _terminate_in_ray_s_start(command: list[str]) -> tuple[int, str, list[psutil.Process]]:
    """Run ``command``; once the driver has started Ray's first process (its GCS server),
    SIGTERM to the driver alone; its exit code, output, and the processes it had started."""
    driver = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + TIMEOUT_S
    try:
        started: list[psutil.Process] = []
        while not any("gcs_server" in p.name() for p in started):
            assert driver.poll() is None, driver.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "Ray did not start in time"
            time.sleep(0.05)
            started = psutil.Process(driver.pid).children(recursive=True)
        driver.send_signal(signal.SIGTERM)
        out, _ = driver.communicate(timeout=TIMEOUT_S)
    finally:
        driver.kill()
    return driver.returncode, out, started


def _metadata(exp: Path) -> dict:
    return json.loads((exp / "tuner_experiment.json").read_text())


@pytest.mark.timeout(1200)  # six drivers, four Ray starts: past 600 s on a busy machine
def test_sigterm_in_every_phase_stops_like_ctrl_c(tmp_path: Path) -> None:
    exp = tmp_path / "experiments" / "termed"
    first = _cli(
        tmp_path,
        str(SPACE),
        "--num-samples", "3", "--no-early-stopping", "--speed-repeats", "1", "--no-report",
        "--remeasure-top", "2", "--remeasure-repeats", "3", "--remeasure-max-repeats", "3",
        "--effects-repeats", "2",
    )  # fmt: skip
    code, out = _terminate_at(first, TRIAL_ENDED)
    assert code == EXIT_TERMINATED, out[-3000:]
    assert "Search interrupted:" in out and f"{RESUME} --storage" in out, out[-3000:]
    assert "Traceback" not in out and "--no-report" in out.split(RESUME)[1].splitlines()[0]
    assert _metadata(exp)["state"] == "interrupted"
    _assert_the_study_reads_as_the_table(exp)  # the interrupted trial: incomplete in both

    code, out = _terminate_at(_cli(tmp_path, "--resume"), r"^Re-measuring ")
    assert code == EXIT_TERMINATED, out[-3000:]
    assert "Interrupted during the re-measurement" in out and RESUME in out, out[-3000:]
    meta = _metadata(exp)
    assert meta["state"] == "interrupted" and meta["interrupted_during"] == "re-measurement"
    assert meta["finished_after_trials"]["steps"] == []  # nothing to keep: it runs again

    code, out = _terminate_at(_cli(tmp_path, "--resume"), r"^Measuring each technique's effect")
    assert code == EXIT_TERMINATED, out[-3000:]
    assert "Interrupted during the technique effects" in out and RESUME in out, out[-3000:]
    meta = _metadata(exp)
    assert meta["state"] == "interrupted" and meta["interrupted_during"] == "technique effects"
    remeasured = (exp / "remeasure.csv").read_bytes()

    code, out, _ = _terminate_in_ray_s_start(_cli(tmp_path, "--resume"))
    assert code == EXIT_TERMINATED, out[-3000:]
    assert "Stopped before 'termed' resumed: it is as it was." in out and RESUME in out, out
    assert _metadata(exp)["state"] == "interrupted" and not (exp / "driver.lock").exists()

    last = subprocess.run(_cli(tmp_path, "--resume"), capture_output=True, text=True, timeout=600)
    assert last.returncode == 0, last.stdout[-3000:] + last.stderr[-3000:]
    assert "The re-measurement finished in an earlier run on these trials: kept." in last.stdout
    assert "Re-measuring" not in last.stdout
    assert (exp / "remeasure.csv").read_bytes() == remeasured  # not replaced by a new one
    assert (exp / "effects.csv").is_file()
    meta = _metadata(exp)
    assert meta["state"] == "finished" and meta["interrupted_during"] is None
    _assert_the_study_reads_as_the_table(exp)
    assert meta["finished_after_trials"]["steps"] == [
        "re-measurement",
        "seed retraining",
        "technique effects",
    ]


def test_sigterm_during_ray_s_start_says_nothing_was_kept_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    """Ray's start takes a minute or more on a busy machine: a SIGTERM then ends the driver with
    143 and one line, no lock file, no folder, none of Ray's processes left (issue 40)."""
    command = _cli(tmp_path, str(SPACE), "--num-samples", "1", "--no-report")
    code, out, started = _terminate_in_ray_s_start(command)
    assert code == EXIT_TERMINATED, out[-3000:]
    assert "Stopped before the search 'termed' started: nothing was kept." in out, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert not (tmp_path / "experiments" / "termed").exists()  # no lock file, no empty folder
    _, alive = psutil.wait_procs(started, timeout=30)
    assert not alive, alive


def _assert_the_study_reads_as_the_table(exp: Path) -> None:
    """Nothing RUNNING or WAITING in study.db; each Ray trial's latest Optuna trial has the kind
    trials.csv gives it (issue 40)."""
    study = optuna.load_study(study_name=exp.name, storage=f"sqlite:///{exp / 'study.db'}")
    open_states = (TrialState.RUNNING, TrialState.WAITING)
    assert not [t.number for t in study.trials if t.state in open_states]
    kinds = {t.user_attrs[STUDY_TRIAL_ID_ATTR]: t.user_attrs.get(KIND) for t in study.trials
             if STUDY_TRIAL_ID_ATTR in t.user_attrs}  # fmt: skip
    table = load_experiment(exp).trials
    assert kinds == dict(zip(table[TRIAL_ID].astype(str), table[KIND], strict=True)), kinds
