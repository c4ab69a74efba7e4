"""bench/tier_bench.py's CPU count per test: every process a test started counts, even one it
left behind, and the record reads back as the bench renders it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

from bench import tier_bench
from bench.cpu_per_test import ENV, spent_seconds

BENCH = Path(__file__).resolve().parents[2] / "bench"
BURN_S = 0.5
ROUNDS = 2
# A process the test starts and never waits for (``sh -c '... &'``: the shell exits at once and
# init adopts it): it burns BURN_S of CPU, then leaves a mark.
ORPHAN = f"""import sys, time
start = time.process_time()
while time.process_time() - start < {BURN_S}:
    pass
open(sys.argv[1], "w").close()
"""
# Each test also records the CPU its own process and the children it waited for spent, which
# is all a per-process count would see.
TESTS = f"""
import json, resource, subprocess, sys, time
from pathlib import Path

import pytest


def _own_cpu():
    return sum(
        resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )


@pytest.mark.parametrize("round", range({ROUNDS}))
def test_orphan(round, tmp_path, request):
    own = _own_cpu()
    mark, orphan = tmp_path / "done", Path(__file__).with_name("orphan.py")
    subprocess.run(["sh", "-c", f"{{sys.executable}} {{orphan}} {{mark}} &"], check=True)
    while not mark.exists():
        time.sleep(0.05)
    with open(Path(__file__).with_name("own.jsonl"), "a") as out:
        out.write(json.dumps({{"test": request.node.nodeid, "own_s": _own_cpu() - own}}) + "\\n")
"""


def _run(tmp_path: Path) -> tuple[dict[str, dict], dict[str, float]]:
    (tmp_path / "test_orphans.py").write_text(TESTS)
    (tmp_path / "orphan.py").write_text(ORPHAN)
    out = tmp_path / "cpu.jsonl"
    env = {**os.environ, ENV: str(out), "PYTHONPATH": str(BENCH)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "cpu_per_test", "-p", "no:cacheprovider",
         "-p", "no:xdist", "test_orphans.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    counted = {row["test"]: row for row in map(json.loads, out.read_text().splitlines())}
    own_lines = (tmp_path / "own.jsonl").read_text().splitlines()
    own = {row["test"]: row["own_s"] for row in map(json.loads, own_lines)}
    return counted, own


def test_a_process_the_test_left_behind_is_counted(tmp_path: Path) -> None:
    counted, own = _run(tmp_path)
    assert len(counted) == ROUNDS and set(counted) == set(own)
    burns = list(counted)
    # The orphan's CPU never reaches the test's own process: a per-process count misses it.
    assert all(own[t] < 0.5 * BURN_S for t in burns)
    # The machine-wide count holds it (the clock ticks in 10 ms), however busy the machine.
    assert all(counted[t]["cpu_s"] >= 0.9 * BURN_S for t in burns)
    # (Whether it holds no more than that depends on the load: on a saturated machine the
    # orphan displaces other work, and every second counts every core. The bench records the
    # background before and after each tier for that reason; the arithmetic is checked below.)


def test_busy_seconds_are_every_core_s_time_less_idle_and_guest_counted_once() -> None:
    times = namedtuple("times", "user nice system idle iowait guest guest_nice")
    before = times(100.0, 0.0, 20.0, 500.0, 5.0, 10.0, 0.0)
    after = times(103.0, 1.0, 21.0, 502.0, 6.0, 12.0, 0.0)  # 2 of user's 3 s were a guest's
    assert spent_seconds(before, after) == (8.0, 5.0)


def test_the_record_sums_files_ranks_tests_and_takes_off_the_background() -> None:
    tests = [
        {"test": "tests/a.py::x", "cpu_s": 10.0, "wall_s": 6.0},
        {"test": "tests/b.py::y", "cpu_s": 30.0, "wall_s": 20.0},
        {"test": "tests/a.py::z", "cpu_s": 25.0, "wall_s": 14.0},
    ]
    summary = tier_bench._cpu_summary(tests)
    assert summary["cpu_s"] == 65.0 and summary["tests_wall_s"] == 40.0
    assert [t["test"] for t in summary["costliest"]] == [
        "tests/b.py::y", "tests/a.py::z", "tests/a.py::x"
    ]  # fmt: skip
    assert list(summary["by_file"].items()) == [("tests/a.py", 35.0), ("tests/b.py", 30.0)]
    run = {"wall_s": 60.0, "summary": "3 passed", "background_cpu_s_per_s": [0.1, 0.25]}
    text = "\n".join(tier_bench._cpu_lines({"fast": {**run, **summary}}, cores=2))
    # 65 CPU-s less the larger background, 0.25 x 40 s: 55 s of the tests' own work.
    assert "| fast | 1.0 min | 65 | 0.10, 0.25 | 55 | 3 passed |" in text
    assert "The tests' own work: 55 CPU-s, 0.5 min on 2 cores kept fully busy." in text


def test_a_tier_that_ended_before_its_first_test_reads_as_no_tests(tmp_path: Path) -> None:
    assert tier_bench._read_lines(tmp_path / "absent.jsonl") == []
    half = tmp_path / "half.jsonl"
    half.write_text('{"test": "t::a", "cpu_s": 1.0, "wall_s": 1.0}\n{"test": "t::b", "cp')
    assert [t["test"] for t in tier_bench._read_lines(half)] == ["t::a"]
