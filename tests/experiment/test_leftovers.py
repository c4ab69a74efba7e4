"""A killed driver's leftover processes (Ray's agents outlive a kill -9): the next command on the
experiment ends each by the PID and start time its driver recorded, never another process, and
never while a live driver holds the folder. Real processes, real signals."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tuner.experiment import read_metadata, write_metadata
from tuner.experiment.lock import (
    HELPERS_KEY,
    child_pids,
    driver_lock,
    end_leftovers,
    record_helpers,
)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "120"])
    yield process
    process.kill()
    process.wait()


def _record(
    folder: Path,
    process: subprocess.Popen[bytes],
    *,
    started_delta: float = 0.0,
    driver: int | None = None,
) -> None:
    started = psutil.Process(process.pid).create_time() + started_delta
    entry = {"pid": process.pid, "started": started, "name": "x"}
    if driver is not None:
        entry["driver"] = driver
    write_metadata(folder, {HELPERS_KEY: [entry]})


def test_a_recorded_leftover_is_ended_by_its_pid(sleeper, tmp_path: Path) -> None:
    _record(tmp_path, sleeper)
    assert end_leftovers(tmp_path) == [f"x ({sleeper.pid})"]
    assert sleeper.wait(timeout=10) is not None and not psutil.pid_exists(sleeper.pid)
    assert end_leftovers(tmp_path) == []  # the record is cleared: nothing to end twice


def test_a_reused_pid_is_another_process_and_is_left_alone(sleeper, tmp_path: Path) -> None:
    _record(tmp_path, sleeper, started_delta=-100.0)  # the recorded one started earlier
    assert end_leftovers(tmp_path) == []
    assert sleeper.poll() is None


def test_a_live_driver_s_processes_are_its_own(sleeper, tmp_path: Path) -> None:
    _record(tmp_path, sleeper, driver=os.getpid())  # this process is the live driver
    with driver_lock(tmp_path, command="tuner search (the test)"):
        assert end_leftovers(tmp_path) == []
    assert sleeper.poll() is None


def test_a_resume_holding_the_lock_ends_the_killed_driver_s_leftovers(
    sleeper, tmp_path: Path
) -> None:
    """The resume takes the lock first, then ends what the killed driver left (b06865e ended
    nothing: the holder it saw was itself), and its own record keeps what outlived that."""
    _record(tmp_path, sleeper)  # recorded by a driver that is gone (no "driver": an old record)
    with driver_lock(tmp_path, command="tuner search --resume (the test)"):
        assert end_leftovers(tmp_path) == [f"x ({sleeper.pid})"]
        assert sleeper.wait(timeout=10) is not None
        assert read_metadata(tmp_path)[HELPERS_KEY] == []


def test_a_resume_keeps_the_record_of_a_leftover_it_could_not_end(sleeper, tmp_path: Path) -> None:
    """record_helpers adds the resume's own processes to a killed driver's still running ones
    (b06865e overwrote them, so nothing could end them later)."""
    _record(tmp_path, sleeper)
    record_helpers(tmp_path, existing=child_pids())  # no new process: only the old one stays
    assert [e["pid"] for e in read_metadata(tmp_path)[HELPERS_KEY]] == [sleeper.pid]
    assert end_leftovers(tmp_path) == [f"x ({sleeper.pid})"]


def test_only_what_started_with_the_search_is_recorded(sleeper, tmp_path: Path) -> None:
    existing = child_pids()
    later = subprocess.Popen(["sleep", "120"])
    try:
        record_helpers(tmp_path, existing=existing)
        recorded = {entry["pid"] for entry in read_metadata(tmp_path)[HELPERS_KEY]}
        assert later.pid in recorded and sleeper.pid not in recorded  # older: not the search's
    finally:
        later.kill()
        later.wait()
