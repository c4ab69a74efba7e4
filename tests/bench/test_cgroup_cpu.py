"""bench/cgroup_cpu.py counts a test's subprocesses on pytest-xdist's workers, and only them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPUACCT = Path("/sys/fs/cgroup/cpuacct")

_TESTS = """
import subprocess, sys, time

def test_burns():  # a subprocess that spins for 1.5 s of CPU
    subprocess.run([sys.executable, "-c",
        "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 1.5: pass"],
        check=True)

def test_sleeps():
    time.sleep(1.5)
"""


def _writable() -> bool:
    try:
        probe = CPUACCT / f"tuner-probe-{os.getpid()}"
        probe.mkdir()
        probe.rmdir()
    except OSError:
        return False
    return True


@pytest.mark.slow  # a pytest run of its own on two workers: a bench tool's, not the fast loop's
@pytest.mark.skipif(not _writable(), reason="needs the right to make a cpuacct cgroup")
def test_a_subprocess_is_counted_to_its_test_and_a_sleep_is_not(tmp_path: Path) -> None:
    (tmp_path / "test_two.py").write_text(_TESTS)
    out = tmp_path / "cpu.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # its own run
    env.update(TUNER_CGROUP_CPU=str(out), PYTHONPATH=str(ROOT / "bench"))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "cgroup_cpu", "-n", "2",
               "-p", "no:cacheprovider", "-o", "addopts=", "test_two.py"]  # fmt: skip
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
    rows = {
        row["id"].split("::")[-1]: row for row in map(json.loads, out.read_text().split("\n")[:-1])
    }
    assert rows["test_burns"]["cpu_s"] >= 1.4  # the subprocess's CPU, counted after it exited
    assert rows["test_sleeps"]["cpu_s"] < 0.5 and rows["test_sleeps"]["wall_s"] >= 1.5
    assert {rows["test_burns"]["worker"], rows["test_sleeps"]["worker"]} <= {"gw0", "gw1"}
    assert "controller" in rows
