"""bench/tier_bench.py's CPU count per test: every process a test started counts, even one it
left behind, and the record reads back as the bench renders it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench import tier_bench
from bench.cpu_per_test import ENV

BENCH = Path(__file__).resolve().parents[2] / "bench"
BURN_S = 1.0
BURNER = f"""import sys, time
start = time.process_time()
while time.process_time() - start < {BURN_S}:
    pass
open(sys.argv[1], "w").close()
"""
# A test that starts a process it never waits for (``sh -c '... &'``: the shell exits at once,
# and the burner's parent is init): it spends BURN_S of CPU, then leaves a mark.
TESTS = """
import subprocess, sys, time
from pathlib import Path


def test_burns_in_an_orphan(tmp_path):
    mark, burner = tmp_path / "done", Path(__file__).with_name("burner.py")
    subprocess.run(["sh", "-c", f"{sys.executable} {burner} {mark} &"], check=True)
    while not mark.exists():
        time.sleep(0.05)


def test_idle():
    pass
"""


def test_a_process_the_test_left_behind_is_counted(tmp_path: Path) -> None:
    (tmp_path / "test_burn.py").write_text(TESTS)
    (tmp_path / "burner.py").write_text(BURNER)
    out = tmp_path / "cpu.jsonl"
    env = {**os.environ, ENV: str(out), "PYTHONPATH": str(BENCH)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "cpu_per_test", "-p", "no:cacheprovider",
         "-p", "no:xdist", "test_burn.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = {row["test"]: row for row in map(json.loads, out.read_text().splitlines())}
    assert set(lines) == {"test_burn.py::test_burns_in_an_orphan", "test_burn.py::test_idle"}
    burn = lines["test_burn.py::test_burns_in_an_orphan"]
    # The machine-wide count holds the orphan's second (the clock ticks in 10 ms), which a count
    # of the test process and the children it waited for would miss.
    assert burn["cpu_s"] >= 0.9 * BURN_S
    assert burn["wall_s"] >= 0.9 * BURN_S / os.cpu_count()


def test_the_record_sums_files_ranks_tests_and_states_the_least_wall_time() -> None:
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
    run = {"wall_s": 60.0, "summary": "3 passed", **summary}
    text = "\n".join(
        tier_bench._cpu_lines({"background_cpu_s_per_s": 0.25, "tiers": {"fast": run}}, cores=2)
    )
    # 65 CPU-s, of them 0.25 x 40 s background: 55 s of the tests' own work, 27.5 s on 2 cores.
    assert "| fast | 1.0 min | 65 | 10 | 3 passed |" in text
    assert (
        "The tests' own work: 55 CPU-s. On 2 cores kept fully busy it needs at least 0.5 min"
        in text
    )
