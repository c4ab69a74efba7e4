"""One driver per experiment, in real processes, on one real search resumed twice:

- kill -9 of the driver leaves a stale lock that the next ``--resume`` takes over; its progress
  counters continue from the trials done before;
- Ctrl-C during the re-measurement prints the summary so far and the command that continues
  it, leaves the state ``interrupted`` (exit 130), and Ray's ``Tuner.restore`` hint is not shown;
- ``--set`` on parameters the space samples fixes them: every trial ran the set values, Optuna
  has no distribution for them, and the metadata and the start line say so;
- while the last ``--resume`` runs, a second driver is refused in one line (exit 2), and the
  running one finishes intact: the trials planned, the study and the table agree.
"""

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
from typing import IO

import optuna
import psutil
import pytest
from search_cli import search_command

SPACE = Path(__file__).parent / "spaces" / "resume_space.py"
SAMPLES = 3
TIMEOUT_S = 300
FINISHED = re.compile(r"^\[\s*(?P<done>\d+)/(?P<total>\S+) [^\]]*\] (ok|stopped early|over budget"
                      r"|diverged|errored|incomplete)\s+(?P<trial_id>\w+)\s")  # fmt: skip


def _cli(tmp_path: Path, *extra: str) -> list[str]:
    return search_command(*extra, "--no-report", name="driven", storage=tmp_path / "experiments")


def _first_run(tmp_path: Path) -> list[str]:
    return _cli(
        tmp_path,
        str(SPACE),
        "--num-samples",
        str(SAMPLES),
        "--no-early-stopping",
        "--effects-repeats",
        "0",
        "--speed-repeats",
        "1",
        "--remeasure-top",
        "2",
        "--remeasure-repeats",
        "3",
        "--remeasure-max-repeats",
        "3",
        "--set",
        "batch_size=8",  # the space samples it
        "--set",
        "lr=0.003",  # the space derives it from a sampled base_lr
    )


def _start(command: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _read_until(stream: IO[str], seen: list[str], wanted: str) -> str:
    deadline = time.monotonic() + TIMEOUT_S
    for line in stream:
        seen.append(line)
        if re.search(wanted, line):
            return line
        assert time.monotonic() < deadline, f"no line matching {wanted!r} in time"
    raise AssertionError(f"the driver ended before {wanted!r}:\n{''.join(seen)[-3000:]}")


def _kill_tree(driver: subprocess.Popen[str]) -> None:
    """kill -9 of the driver, then of the local Ray it started (which would outlive it)."""
    try:
        children = psutil.Process(driver.pid).children(recursive=True)
    except psutil.NoSuchProcess:  # it ended on its own (its output says why)
        return
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=60)
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()


@pytest.mark.slow
def test_one_driver_kill_9_and_ctrl_c_in_remeasurement_resume_intact(tmp_path: Path) -> None:
    exp = tmp_path / "experiments" / "driven"
    first = _start(_first_run(tmp_path))
    seen: list[str] = []
    try:
        assert first.stdout is not None
        _read_until(first.stdout, seen, FINISHED.pattern)  # one trial done: now kill -9
    finally:
        _kill_tree(first)
    start_lines = "".join(seen)
    assert "Fixed by --set (out of the space, every trial runs it): batch_size=8, lr=0.003" in (
        start_lines
    )
    assert (exp / "driver.lock").is_file()  # the dead driver's file stays; its lock does not

    resumed = _start(_cli(tmp_path, "--resume"))  # takes the stale lock over
    seen = []
    try:
        assert resumed.stdout is not None
        _read_until(resumed.stdout, seen, r"^Re-measuring ")
        resumed.send_signal(signal.SIGINT)  # Ctrl-C, as a user would
        rest, _ = resumed.communicate(timeout=TIMEOUT_S)
    finally:
        resumed.kill()
    out = "".join(seen) + rest
    assert resumed.returncode == 130, out[-3000:]
    before = int(re.search(r"Resumed: (\d+) trial\(s\) had finished before", out)[1])
    finished = [FINISHED.match(line) for line in seen]
    counters = [(int(m["done"]), m["total"]) for m in finished if m]
    assert 0 < before < SAMPLES, out  # kill -9 cut the trials short
    # Counted on from the trials Ray had ended before ("[2/3]", not "[1/3]"; a trial that
    # ended after Ray's last saved state is restored and ends again in this run).
    assert counters[-1] == (SAMPLES, str(SAMPLES)), out
    assert [done for done, _ in counters] == list(range(SAMPLES - len(counters) + 1, SAMPLES + 1))
    assert "Interrupted during the re-measurement" in out
    assert f"Search interrupted: {SAMPLES} trials" in out
    assert "Continue it with:  python -m tuner search --resume --name driven" in out
    assert "Tuner.restore(" not in out
    meta = json.loads((exp / "tuner_experiment.json").read_text())
    assert meta["state"] == "interrupted" and meta["interrupted_during"] == "re-measurement"

    last = _start(_cli(tmp_path, "--resume"))
    seen = []
    try:
        assert last.stdout is not None
        _read_until(last.stdout, seen, r"^Resuming ")  # it holds the lock: a second is refused
        second = subprocess.run(
            _cli(tmp_path, "--resume"), capture_output=True, text=True, timeout=TIMEOUT_S
        )
        rest, _ = last.communicate(timeout=TIMEOUT_S)
    finally:
        last.kill()
    assert second.returncode == 2, second.stdout[-2000:] + second.stderr[-2000:]
    refusal = second.stderr.strip().splitlines()[-1]
    assert f"is being driven by process {last.pid} on " in refusal, refusal
    out = "".join(seen) + rest
    assert last.returncode == 0, out[-3000:]
    assert f"Search finished: {SAMPLES} trials" in out
    meta = json.loads((exp / "tuner_experiment.json").read_text())
    assert meta["state"] == "finished" and meta["remeasure_failures"] == []
    assert meta["pinned_params"] == ["batch_size", "lr"]
    assert meta["options"]["overrides"] == {"batch_size": 8, "lr": 0.003}
    assert (exp / "remeasure.csv").is_file()
    _assert_every_trial_ran_what_was_set(exp)


def _assert_every_trial_ran_what_was_set(exp: Path) -> None:
    """Each trial finished once, ran the --set values, and is COMPLETE in the study with no
    distribution for what was pinned."""
    finals = {}
    for path in exp.glob("*/result.json"):
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if lines and lines[-1].get("final"):
            finals[lines[-1]["trial_id"]] = lines[-1]
            params = json.loads((path.parent / "params.json").read_text())
            assert (params["batch_size"], params["lr"]) == (8, 0.003)  # what ran is what was set
    assert len(finals) == SAMPLES
    study = optuna.load_study(study_name="driven", storage=f"sqlite:///{exp / 'study.db'}")
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert sorted(t.user_attrs["ray_trial_id"] for t in complete) == sorted(finals)
    assert all(set(t.distributions) == {"base_lr"} for t in complete)  # pinned: no distribution


def test_a_resume_summary_counts_a_table_where_no_trial_reported() -> None:
    import pandas as pd

    from tuner.experiment import typed_trials
    from tuner.tune.run import resumed

    class _Folder:  # resumed reads only the trials table
        trials = typed_trials(pd.DataFrame({"trial_id": ["a"], "kind": ["incomplete"]}))

    assert resumed(_Folder(), 0.0, []) == {"before": 0, "after": 0, "orphans": []}


def test_ctrl_c_before_the_trials_end_prints_the_summary_so_far_and_the_resume_command(
    smoke_experiment: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    import shutil

    from tuner.experiment.paths import ExperimentPaths
    from tuner.tune.driver import summary_so_far

    folder = tmp_path / "exp"
    shutil.copytree(smoke_experiment, folder)
    paths = ExperimentPaths.of(str(tmp_path), "exp")
    summary_so_far(paths)
    out = capsys.readouterr().out
    assert "Search interrupted:" in out and f"Continue it with:  {paths.resume_command()}" in out
    summary_so_far(ExperimentPaths.of(str(tmp_path), "nothing-yet"))  # no folder to read yet
    assert capsys.readouterr().out.strip().startswith("Continue it with:  python -m tuner")


@pytest.mark.slow
def test_kill_9_during_the_effects_keeps_the_finished_remeasurement(tmp_path: Path) -> None:
    """The re-measurement is recorded as finished when it ends, not when the effects end too: a
    kill -9 during the effects, then ``--resume``, keeps it instead of measuring it again with
    fewer rounds (issue 40)."""
    exp = tmp_path / "experiments" / "driven"
    command = _cli(
        tmp_path,
        str(SPACE),
        "--num-samples", "2", "--no-early-stopping", "--speed-repeats", "1",
        "--remeasure-top", "2", "--remeasure-repeats", "3", "--remeasure-max-repeats", "3",
        "--effects-repeats", "2",
    )  # fmt: skip
    first = _start(command)
    seen: list[str] = []
    try:
        assert first.stdout is not None
        _read_until(first.stdout, seen, r"^Measuring each technique's effect")
    finally:
        _kill_tree(first)
    remeasured = (exp / "remeasure.csv").read_bytes()
    meta = json.loads((exp / "tuner_experiment.json").read_text())
    assert meta["finished_after_trials"]["steps"] == ["re-measurement", "seed retraining"], meta

    last = subprocess.run(_cli(tmp_path, "--resume"), capture_output=True, text=True, timeout=600)
    assert last.returncode == 0, last.stdout[-3000:] + last.stderr[-3000:]
    assert "The re-measurement finished in an earlier run on these trials: kept." in last.stdout
    assert "Re-measuring" not in last.stdout
    assert (exp / "remeasure.csv").read_bytes() == remeasured  # not replaced by a new one
    meta = json.loads((exp / "tuner_experiment.json").read_text())
    assert meta["finished_after_trials"]["steps"] == [
        "re-measurement",
        "seed retraining",
        "technique effects",
    ]
    assert meta["remeasure"]  # what the kept re-measurement found stays in the metadata


@pytest.mark.slow
def test_kill_9_of_the_driver_alone_then_resume_ends_what_it_left_and_checks(
    tmp_path: Path,
) -> None:
    """Issue 48: after kill -9 of the driver alone (its local Ray lives on, reparented to init),
    the resume ended nothing (it saw its own lock) and overwrote the record of the killed
    driver's processes. Now the resume ends them, says so, and when it exits no process of the
    killed driver is alive; ``report --check`` holds on the resumed experiment (its trials'
    wall time leaves the down time out)."""
    exp = tmp_path / "experiments" / "driven"
    flags = ["--num-samples", "2", "--no-early-stopping", "--effects-repeats", "0",
             "--speed-repeats", "1", "--remeasure-top", "2", "--remeasure-repeats", "3",
             "--remeasure-max-repeats", "3"]  # fmt: skip
    first = _start(_cli(tmp_path, str(SPACE), *flags))
    seen: list[str] = []
    left: list[psutil.Process] = []
    try:
        assert first.stdout is not None
        _read_until(first.stdout, seen, FINISHED.pattern)  # one trial done: now kill -9
        left = psutil.Process(first.pid).children(recursive=True)
        first.send_signal(signal.SIGKILL)  # the driver alone, as `kill -9 PID` does
        first.wait(timeout=60)
        time.sleep(3)  # its Ray lives on without it
        assert any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in left)
        out = tmp_path / "report"
        resumed = subprocess.run(
            _cli(tmp_path, "--resume"), capture_output=True, text=True, timeout=TIMEOUT_S
        )
        assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
        alive = [p for p in left if _alive(p)]
        assert not alive, [p.info if hasattr(p, "info") else p.pid for p in alive]
        ended = re.search(r"Ended (\d+) process\(es\) a killed driver of 'driven' left running",
                          resumed.stderr)  # fmt: skip
        assert ended and int(ended[1]) >= 1, resumed.stderr[-2000:]
        meta = json.loads((exp / "tuner_experiment.json").read_text())
        assert first.pid not in {e.get("driver") for e in meta["driver_helpers"]}  # all ended
        tuner = [sys.executable, "-m", "tuner", "report"]
        for flags in ([], ["--check"]):
            done = subprocess.run([*tuner, *flags, str(exp), "--out", str(out)],
                                  capture_output=True, text=True, timeout=TIMEOUT_S)  # fmt: skip
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    finally:
        first.kill()
        for process in left:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
