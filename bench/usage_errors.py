"""How long ``python -m tuner`` takes to answer a usage error that needs only arguments and
files (issue 29: under 2 s, before torch and Ray are imported; issue 40: under 1 s, before
pandas and Optuna too), each case in a fresh process, ``--rounds`` interleaved rounds; the
median and range per case, and which heavy modules loaded.

    PYTHONPATH=. python bench/usage_errors.py --rounds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tuner.experiment.lock import driver_lock

# Runs ``python -m tuner ARGS``; at exit says which heavy modules it imported.
_HARNESS = """
import atexit, json, runpy, sys
atexit.register(lambda: print("imported:", json.dumps(
    [m for m in ("torch", "ray", "pandas", "optuna") if m in sys.modules]), file=sys.stderr))
sys.argv = ["tuner", *sys.argv[1:]]
runpy.run_module("tuner", run_name="__main__")
"""


def _cases(storage: Path) -> dict[str, list[str]]:
    where = ["--storage", str(storage)]
    broken = storage / "broken_space.py"
    broken.write_text("def space(trial, *, cuda):\n    return {'lr': (}\n")
    return {
        "a space file with a syntax error": ["search", str(broken), *where],
        "--resume of an unknown name": ["search", "--resume", "--name", "no_such_name", *where],
        "--set lr=-1": ["search", "smoke_space", "--set", "lr=-1", *where],
        "--set lr=abc": ["search", "smoke_space", "--set", "lr=abc", *where],
        "a second driver (lock held)": ["search", "smoke_space", "--name", "held", *where],
        "--max-memory below 4x the weights": [
            "search",
            "smoke_space",
            "--max-memory",
            "1KB",
            *where,
        ],
    }


def _once(argv: list[str]) -> tuple[float, int, list[str]]:
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _HARNESS, *argv], capture_output=True, text=True)
    seconds = time.perf_counter() - began
    imported = json.loads(done.stderr.strip().splitlines()[-1].removeprefix("imported: "))
    return seconds, done.returncode, imported


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        storage = Path(folder)
        cases = _cases(storage)
        times: dict[str, list[float]] = {name: [] for name in cases}
        seen: dict[str, tuple[int, list[str]]] = {}
        with driver_lock(storage / "held", command="bench/usage_errors.py"):
            for _ in range(args.rounds):  # interleaved: a busy machine's drift hits all alike
                for name, argv in cases.items():
                    seconds, code, imported = _once(argv)
                    times[name].append(seconds)
                    seen[name] = (code, imported)
    for name, values in times.items():
        code, imported = seen[name]
        print(
            f"{name:38s} median {statistics.median(values):5.2f} s "
            f"[{min(values):.2f}-{max(values):.2f}]  exit {code}  imported {imported or 'neither'}"
        )


if __name__ == "__main__":
    main()
