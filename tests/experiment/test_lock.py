"""The driver lock with real processes: a live holder refuses a second driver, a killed one
(kill -9) leaves a lock the next driver takes over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.experiment.lock import LOCK_FILE, ExperimentLocked, driver_lock, holder

HOLD = """
import sys, time
from pathlib import Path
from tuner.experiment.lock import driver_lock
with driver_lock(Path(sys.argv[1]), command="tuner search demo"):
    print("held", flush=True)
    time.sleep(60)
"""


def _start_holder(folder: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_live_driver_refuses_a_second_and_a_killed_one_is_taken_over(tmp_path: Path) -> None:
    folder = tmp_path / "exp"
    proc = _start_holder(folder)
    try:
        assert holder(folder)["pid"] == proc.pid
        refused = rf"process {proc.pid} on .*tuner search demo"
        with pytest.raises(ExperimentLocked, match=refused), driver_lock(folder, command="2nd"):
            pytest.fail("a second driver got the lock")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert (folder / LOCK_FILE).is_file()  # the dead driver's file stays ...
        assert holder(folder) is None  # ... but nobody holds it
        with driver_lock(folder, command="resume"):
            assert holder(folder)["pid"] == os.getpid()
            assert holder(folder)["command"] == "resume"
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert holder(folder) is None  # released at the end of the block


def test_the_lock_is_released_when_the_block_raises(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), driver_lock(tmp_path, command="x"):
        raise KeyboardInterrupt
    assert holder(tmp_path) is None  # free at once, not after a wait (no clock: load moves it)
    with driver_lock(tmp_path, command="y"):
        assert holder(tmp_path)["command"] == "y"
