"""What a stage is given (its folder, the device, its time) and how it writes its files."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from tuner.units import json_ready

__all__ = ["DRY_RUN_DIR", "STOPPED", "StageContext", "StageResult", "device_slug", "run_stoppable"]

DRY_RUN_DIR = Path("reports") / "gpu-suite-dry-run"  # git-ignored, unlike reports/examples/
T = TypeVar("T")
STOPPED = 124  # a child's exit code when the stage stopped it (as timeout(1) reports)


@dataclass(frozen=True)
class StageResult:
    """How a stage went: ``ok`` (its checks passed) and one line saying what it found."""

    ok: bool
    summary: str


@dataclass
class StageContext:
    """One stage's run: where it writes, on which device, in how much time.

    Attributes:
        name: the stage's name (its folder's name).
        out_dir: the stage's folder; every file the stage makes goes here.
        dry_run: tiny settings on the CPU, to check the stage's mechanics.
        cuda: the stage runs on a CUDA device (never in a dry run).
        time_limit_s: the stage's measuring loops start nothing that would end after this.
        options: what the command line passed on (``repeats``, ``max_memory``, ...).
        log: progress lines (stderr).
    """

    name: str
    out_dir: Path
    dry_run: bool
    cuda: bool
    time_limit_s: float
    options: Mapping[str, Any] = field(default_factory=dict)
    log: Callable[[str], Any] = print
    started: float = field(default_factory=time.perf_counter)

    @property
    def device(self) -> str:
        """The ``TrainConfig.device`` of every run of the stage."""
        return "cuda" if self.cuda else "cpu"

    def pick(self, gpu: T, dry: T) -> T:
        """The GPU setting, or the dry run's tiny one."""
        return dry if self.dry_run else gpu

    def repeats(self, gpu: int, dry: int) -> int:
        """``--repeats`` if given, else the stage's default for this mode."""
        return int(self.options.get("repeats") or self.pick(gpu, dry))

    def remaining_s(self) -> float:
        """Seconds left of the stage's time limit."""
        return self.time_limit_s - (time.perf_counter() - self.started)

    def path(self, name: str) -> Path:
        return self.out_dir / name

    def write_json(self, name: str, data: Any) -> Path:
        path = self.path(name)
        path.write_text(json.dumps(json_ready(data), indent=2, sort_keys=True) + "\n")
        return path

    def write_csv(self, name: str, frame: pd.DataFrame) -> Path:
        path = self.path(name)
        frame.to_csv(path, index=False)
        return path

    def write_markdown(self, title: str, sections: list[Any]) -> Path:
        """``<stage>.md`` and ``<stage>.html`` from :mod:`tuner.report.document` sections."""
        from tuner.report.document import render_html, render_markdown

        (self.out_dir / f"{self.name}.html").write_text(render_html(title, sections))
        path = self.out_dir / f"{self.name}.md"
        path.write_text(render_markdown(title, sections))
        return path


def device_slug(device_name: str) -> str:
    """``"NVIDIA H100 80GB HBM3"`` -> ``"nvidia-h100-80gb-hbm3"`` (a folder name)."""
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-") or "unknown"


def run_stoppable(
    command: list[str],
    log_path: Path,
    timeout: float,
    *,
    cwd: Path | None = None,
    grace_s: float = 20.0,
) -> int:
    """Run ``command`` (output to ``log_path``); its exit code, or :data:`STOPPED`.

    Past ``timeout`` the child gets SIGINT, as after Ctrl-C, so it can keep what it did: pytest
    writes its JUnit XML of the tests that ran, ``tuner search`` stops Ray's trials and marks the
    experiment interrupted. A child still alive ``grace_s`` later is killed.
    """
    with log_path.open("w") as log:
        child = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
        try:
            return child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGINT)
            try:
                child.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
    with log_path.open("a") as log:
        log.write(f"\n[stopped by the stage after {timeout:.0f} s]\n")
    return STOPPED
