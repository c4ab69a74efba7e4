"""A stopped search resumes to completion, no trial lost or run twice: a real Ctrl-C to the CLI,
and the loss of the local Ray's raylet (the driver says so in one line, with the command that
resumes). A finished search resumed with more samples or a later time budget runs only the new
trials and keeps the new limit."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import psutil
import pytest
from search_cli import search_command

from tuner.commands import main
from tuner.experiment.paths import ExperimentPaths

SPACE = Path(__file__).parent / "spaces" / "resume_space.py"
SAMPLES = 3
TIMEOUT_S = 300
PROGRESS_LINE = re.compile(r"^\[[^\]]*\]\s+(?P<event>[\w-]+)\s+(?P<trial_id>\w+)\s")


def _cli(tmp_path: Path, *extra: str) -> list[str]:
    return search_command(
        *extra,
        "--no-report",
        "--remeasure-top",
        "0",
        "--no-early-stopping",
        "--effects-repeats",
        "0",
        "--speed-repeats",
        "1",
        name="resumed",
        storage=tmp_path / "experiments",
    )


def _records(exp: Path) -> dict[str, list[dict[str, Any]]]:
    records = {}
    for path in exp.glob("*/result.json"):
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if lines:
            records[lines[0]["trial_id"]] = lines
    return records


def _interrupt_after_first_trial(tmp_path: Path) -> tuple[list[str], int, str]:
    """The trials finished when Ctrl-C came, the exit code, and the last line of stdout."""
    driver = subprocess.Popen(
        _cli(tmp_path, str(SPACE), "--num-samples", str(SAMPLES), "--json"),
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
            match = PROGRESS_LINE.match(line)
            if match and match["event"] not in ("start", "running"):
                finished.append(match["trial_id"])
                driver.send_signal(signal.SIGINT)  # Ctrl-C, as a user would
                break
            assert time.monotonic() < deadline, "no trial finished in time"
        rest, _ = driver.communicate(timeout=TIMEOUT_S)
    finally:
        driver.kill()
    return finished, driver.returncode, rest.strip().splitlines()[-1]


# A real Ctrl-C, then --resume (the raylet loss below is its kin). Long tier: two drivers, two Ray
# starts and a report cost 120 CPU-seconds, a fifth of the fast tier's (tests/tiers.py: FAST_CPU).
@pytest.mark.slow
def test_interrupted_search_resumes_without_running_a_finished_trial_twice(
    tmp_path: Path, nothing_lost: Any
) -> None:
    exp = tmp_path / "experiments" / "resumed"
    finished, returncode, last = _interrupt_after_first_trial(tmp_path)
    assert finished and returncode == 130
    result = json.loads(last)  # --json: the result so far, and how to go on
    assert (result["status"], result["exit_code"], result["report"]) == ("interrupted", 130, None)
    assert result["resume"].startswith("python -m tuner search --resume --name resumed")
    assert sum(result["trials"].values()) >= len(finished)
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
    before_count = len(done_before)
    assert (
        f"Resumed: {before_count} trial(s) had finished before, "
        f"{SAMPLES - before_count} finished in this run." in resumed.stdout
    )

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
    nothing_lost(exp, resumed.stdout, tmp_path / "report")
    # Issue 48: the auditor failed every resumed experiment (each trial's time leaves out the
    # driver's down time, which its rule did not know).
    checked = main(["report", "--check", str(exp), "--out", str(tmp_path / "report")])
    assert checked == 0


@pytest.mark.slow
def test_losing_the_raylet_is_one_line_with_the_command_that_resumes(tmp_path: Path) -> None:
    exp = tmp_path / "experiments" / "resumed"
    driver = subprocess.Popen(
        _cli(tmp_path, str(SPACE), "--num-samples", "2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    killed = 0
    seen: list[str] = []
    try:
        assert driver.stdout is not None
        for line in driver.stdout:  # a trial is running: kill this node's raylet under it
            seen.append(line)
            match = PROGRESS_LINE.match(line)
            if match and match["event"] == "start":
                killed = _kill_raylet(driver.pid)
                break
        stdout, stderr = driver.communicate(timeout=TIMEOUT_S)
    finally:
        driver.kill()
    assert killed and driver.returncode == 1, stderr[-3000:]
    # Ray's own lines (the raylet's paragraph, ray.init's token warning) go to ray.log, not here
    console = "".join(seen) + stdout + stderr
    assert "(raylet)" not in console and "Token authentication" not in console, console
    assert console.count(str(exp / "ray.log")) == 1  # named once
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: The search lost Ray's raylet on this node (127.0.0.1:")
    assert f"the trials that finished are saved in {exp}." in last
    command = last.split("Continue with: ", 1)[1].split()
    assert command[:5] == ["python", "-m", "tuner", "search", "--resume"]
    assert json.loads((exp / "tuner_experiment.json").read_text())["state"] == "interrupted"

    resumed = subprocess.run(
        [sys.executable, *command[1:]], capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    after = _records(exp)
    assert sum(lines[-1]["final"] and lines[-1]["status"] == "ok" for lines in after.values()) == 2


def _kill_raylet(driver_pid: int) -> int:
    """SIGKILL the raylet of the local Ray instance the driver started; its pid."""
    for child in psutil.Process(driver_pid).children(recursive=True):
        if child.name() == "raylet":
            child.kill()
            return child.pid
    raise AssertionError("the driver started no raylet")


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done


def _result_files(exp: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in exp.glob("*/result.json")}


# The fast siblings, without a cluster: tests/experiment/test_limits.py (the searcher, generator and
# stopper restored as Ray restores them) and test_usage_errors.py (a limit refused before Ray).
@pytest.mark.slow
def test_more_samples_on_resume_run_only_the_new_trials_and_are_kept(tmp_path: Path) -> None:
    exp = tmp_path / "experiments" / "resumed"
    _run(_cli(tmp_path, str(SPACE), "--num-samples", "2"))
    before, files = _records(exp), _result_files(exp)
    assert len(before) == 2

    more = _run(_cli(tmp_path, "--resume", "--num-samples", "3"))
    assert (
        "note: --num-samples 3 applies from this resume on: resumed runs up to 3 trials in all "
        "(2 started before; they are kept, not run again)." in more.stderr.splitlines()
    )
    assert "Resumed: 2 trial(s) had finished before, 1 finished in this run." in more.stdout
    assert "Search finished: 3 trials (3 ok)" in more.stdout
    after = _records(exp)
    assert len(after) == 3 and set(before) < set(after)
    assert {path: path.read_bytes() for path in files} == files  # the first two untouched
    meta = json.loads((exp / "tuner_experiment.json").read_text())
    assert meta["num_samples"] == meta["options"]["num_samples"] == 3
    study = optuna.load_study(study_name="resumed", storage=f"sqlite:///{exp / 'study.db'}")
    assert sorted(t.user_attrs["ray_trial_id"] for t in study.trials) == sorted(after)

    again = _run(_cli(tmp_path, "--resume"))  # a later resume keeps the count: nothing runs
    assert "Resumed: 3 trial(s) had finished before, 0 finished in this run." in again.stdout
    assert len(_records(exp)) == 3 and "note:" not in again.stderr
    command = ExperimentPaths.of(str(tmp_path / "experiments"), "resumed").resume_command()
    assert command.endswith("--num-samples 3")  # what "Continue it with" prints


# The first run's time budgets: the first that lets a trial finish on this machine now (trials
# of a few seconds when quiet; several times that under coverage beside a CPU hog).
FIRST_BUDGETS_S = (15, 45, 120)


def _first_run_ended_by_its_budget(tmp_path: Path) -> int:
    """A search ended by its time budget with a trial finished (the premise of the resume), from
    scratch with the next budget when none finished: what the search did decides, not a clock."""
    for budget in FIRST_BUDGETS_S:
        shutil.rmtree(tmp_path / "experiments", ignore_errors=True)
        first = ["--search-time-budget-s", str(budget), "--set", "images=2400"]  # 200 steps of 12
        done = subprocess.run(
            _cli(tmp_path, str(SPACE), *first), capture_output=True, text=True, timeout=TIMEOUT_S
        )
        if done.returncode == 0:
            return budget
        too_short = "No trial finished ok: give the search more time" in done.stdout
        assert done.returncode == 1 and too_short, done.stdout[-2000:] + done.stderr[-2000:]
    raise AssertionError(f"no trial finished within a {budget} s budget: {done.stdout[-2000:]}")


@pytest.mark.slow
@pytest.mark.timeout(4 * TIMEOUT_S)  # up to three first runs and the resume, each within its own
def test_a_later_time_budget_on_resume_runs_until_the_new_total(tmp_path: Path) -> None:
    exp = tmp_path / "experiments" / "resumed"
    first_budget = _first_run_ended_by_its_budget(tmp_path)
    before, files = _records(exp), _result_files(exp)
    used = json.loads((exp / "tuner_experiment.json").read_text())["search_clock"]["used_s"]
    # The budget ended the first run (it had no trial count; a stopper that never fired would
    # have run into the subprocess timeout).
    assert first_budget <= used and before

    budget = round(used) + max(25, round(used))  # room for new trials, as long as the first run
    later = _run(_cli(tmp_path, "--resume", "--search-time-budget-s", str(budget)))
    note = (
        f"note: --search-time-budget-s {budget} applies from this resume on: the search resumed "
        f"runs its trials for up to {budget} s in all, every run together ({used:.0f} s used, "
        f"{budget - used:.0f} s left)."
    )
    assert note in later.stderr.splitlines()
    meta = json.loads((exp / "tuner_experiment.json").read_text())
    assert meta["search_time_budget_s"] == meta["options"]["search_time_budget_s"] == budget
    # The second run went on until the new total, not beyond: a budget counted from the resume
    # alone would have run `used` s longer. (Tune's end of each run counts too: under `used`
    # while the second run's end takes less than the first run did in all.)
    assert budget <= meta["search_clock"]["used_s"] < budget + used
    after = _records(exp)
    assert set(before) < set(after)  # new trials; one the first end cut stays as it was
    assert {path: path.read_bytes() for path in files} == files
