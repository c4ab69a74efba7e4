"""SIGSTOP of a data-parallel trial's rank 1 mid-trial, in a ``--world-size 2`` smoke search run
as a user runs it (a subprocess, its own Ray, 2 gloo ranks per trial): the stall is found by
the ranks' heartbeat (tuner.tune.rank_beat), the trial is retried from its checkpoint within
120 s of the stop, the console says so in one line (the rank, its node, the step, the attempt),
the search finishes with every trial's kind right and the retry in its record, and no process
is left behind. While the trial ran, its rendezvous listened on loopback only."""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest
from search_cli import search_command
from test_driver import _kill_tree
from trial_reports import written_reports

from tuner import record
from tuner.experiment import STUDY_TRIAL_ID_ATTR, load_experiment
from tuner.report import write_report

pytestmark = [pytest.mark.slow, pytest.mark.machine, pytest.mark.timeout(900)]

TIMEOUT_S = 780
IMAGES = 48000  # a trial's budget: about 20 s on 2 idle CPUs
RETRY = re.compile(
    r"retry  (\w+)  attempt 2 of \d+ from its checkpoint: RankFailed: rank 1 stalled "
    r"\(node [0-9.]+, pid (\d+)\) at step (\d+): no heartbeat for \d+ s"
)
LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


class Console:
    """The search's console, each line with when it came (a reader thread)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[tuple[float, str]] = []
        self.thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self.thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append((time.time(), line.rstrip("\n")))

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def _ray_processes(driver: psutil.Process, title: str) -> list[psutil.Process]:
    found = []
    for proc in driver.children(recursive=True):
        try:
            if " ".join(proc.cmdline()).startswith(title):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _listening(proc: psutil.Process) -> set[str]:
    try:
        return {c.laddr.ip for c in proc.net_connections("inet") if c.status == psutil.CONN_LISTEN}
    except psutil.Error:
        return set()


def _early_report(storage: Path) -> bool:
    """Whether a trial has taken a report (its ranks up and training) with at most half its
    images seen: a stop now lands mid-trial, before its ranks' last collective."""
    for trial_results in storage.glob("*/*/result.json"):
        lines = written_reports(trial_results)
        if lines and not lines[-1].get("final") and lines[-1][record.IMAGES_SEEN] <= IMAGES / 2:
            return True
    return False


def _stop_rank_mid_trial(
    driver: subprocess.Popen[str], console: Console, storage: Path
) -> dict[str, object]:
    """At a trial's first report (read from the result.json Tune writes at each one: the
    console's running line comes every 15 s, by when a trial may be near its end): the
    listeners of its processes, then SIGSTOP of its rank 1."""
    tree = psutil.Process(driver.pid)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert driver.poll() is None, console.text()[-3000:]
        workers = _ray_processes(tree, "ray::RankWorker")
        if workers and _early_report(storage):
            trials = _ray_processes(tree, "ray::ImplicitFunc")
            listening = set().union(*(_listening(p) for p in [*trials, *workers]))
            workers[0].send_signal(signal.SIGSTOP)
            return {"pid": workers[0].pid, "at": time.time(), "listening": listening}
        time.sleep(0.05)
    raise AssertionError(f"no trial trained in time:\n{console.text()[-3000:]}")


def test_a_stopped_rank_is_found_and_its_trial_retried(tmp_path: Path) -> None:
    storage = tmp_path / "experiments"
    # One trial at a time (--concurrency 1): the rank worker stopped is the reported trial's.
    flags = ["smoke_space", "--world-size", "2", "--cpus-per-trial", "1", "--num-samples", "2",
             "--concurrency", "1",
             "--set", f"images={IMAGES}", "--set", f"eval_every_images={IMAGES // 16}",
             "--remeasure-top", "0", "--effects-repeats", "0",
             "--no-report"]  # fmt: skip
    command = search_command(*flags, name="stalled", storage=storage)
    driver = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    console = Console(driver)
    seen: list[psutil.Process] = []
    try:
        stopped = _stop_rank_mid_trial(driver, console, storage)
        tree = psutil.Process(driver.pid)
        seen = [*_ray_processes(tree, "ray::RankWorker"), *_ray_processes(tree, "ray::Implicit")]
        driver.wait(timeout=TIMEOUT_S)
    finally:
        _kill_tree(driver)
        console.thread.join(timeout=10)
    out = console.text()
    assert driver.returncode == 0, out[-3000:]
    assert stopped["listening"] and stopped["listening"] <= LOOPBACK, stopped["listening"]
    # One line: the rank, its node and pid, its step, the retry and its attempt count.
    retries = [(at, line) for at, line in console.lines if "retry  " in line]
    assert len(retries) == 1, out[-3000:]
    at, line = retries[0]
    found = RETRY.search(line)
    assert found is not None, line
    assert int(found.group(2)) == stopped["pid"]
    assert at - float(stopped["at"]) < 120, out[-3000:]
    # The stopped process and every rank and trial process of the search are gone.
    for proc in seen:
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, proc
    assert not psutil.pid_exists(int(stopped["pid"]))
    # Every trial's kind is right; the retried one carries its retry and why.
    experiment = load_experiment(next(storage.glob("stalled*")))
    trials = experiment.trials.set_index(record.TRIAL_ID)
    assert set(trials[record.KIND]) <= {"ok", "stopped early"}, trials[record.KIND]
    retried = trials.loc[found.group(1)]
    assert retried[record.KIND] == "ok"
    assert retried[record.RETRIES] == 1 and "rank 1 stalled" in retried[record.LAST_ERROR]
    others = trials.drop(index=found.group(1))
    assert (others[record.RETRIES] == 0).all()
    # The study and the report carry it too.
    told = {t.user_attrs.get(STUDY_TRIAL_ID_ATTR): t.user_attrs for t in experiment.study.trials}
    assert told[found.group(1)][record.RETRIES] == 1
    write_report(experiment, out_dir=tmp_path / "report")
    text = (tmp_path / "report" / "report.md").read_text()
    assert "Trials retried from a checkpoint after a failure" in text
    assert f"| {found.group(1)} | ok | 1 | RankFailed: rank 1 stalled" in text
