"""Measurements in fresh processes (the fidelity check, the data-parallel pair): this package
importable in them, and their one JSON line read back."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["child_env", "run_json"]

_ROOT = Path(__file__).resolve().parents[2]  # the folder holding the tuner package


def child_env(threads: int | None = None) -> dict[str, str]:
    """The environment of a measured process: this package importable, threads if given."""
    path = os.pathsep.join(p for p in (str(_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def run_json(
    command: list[str], *, env: dict[str, str], timeout: float, limit: int
) -> dict[str, Any] | str:
    """The JSON object a process printed last, or why there is none (one line, ``limit`` chars);
    a process that fails or hangs is never an exception."""
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:.0f} s"
    lines = done.stdout.strip().splitlines()
    if not lines or not lines[-1].startswith("{"):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"exit {done.returncode}: {tail}"[:limit]
    return json.loads(lines[-1])
