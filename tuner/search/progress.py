"""Console progress: one line per started and finished trial instead of Ray's wide tables."""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

from ray.tune import Callback

from tuner.units import format_bytes

__all__ = ["ProgressPrinter", "describe_params"]

_SKIP = {"model", "model_kwargs", "data", "img_size", "epochs", "steps", "time_budget_s",
         "eval_every_steps", "warmup_steps", "max_eval_batches", "seed", "device"}  # fmt: skip


class ProgressPrinter(Callback):
    """Prints ``[done/total] status trial  img/s  acc  peak  params`` as trials finish."""

    def __init__(self, *, total: int | None, stream: TextIO | None = None) -> None:
        self.total = total
        self.stream = stream  # None: sys.stdout at print time (Ray pickles this callback)
        self.done = 0
        self.start = time.monotonic()

    def setup(self, **info: Any) -> None:
        """Each run (also a resumed one, which unpickles this callback) counts from now."""
        self.done = 0
        self.start = time.monotonic()

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._print(f"start  {trial.trial_id}  {describe_params(trial.config)}")

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._finished(trial, trial.last_result or {})

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        result = trial.last_result or {}
        self._finished(trial, {**result, "status": "error"})

    def _finished(self, trial: Any, result: dict[str, Any]) -> None:
        self.done += 1
        status = str(result.get("status") or "?")
        if status == "ok" and not result.get("feasible", True):
            status = "over-budget"
        elif status == "ok" and not result.get("final", True):
            status = "stopped"  # early stopping (ASHA) ended it at an intermediate report
        line = (
            f"{status:<11} {trial.trial_id}  {_num(result.get('images_per_second'), '.1f')} img/s"
            f"  acc {_num(result.get('val_accuracy'), '.3f')}"
            f"  peak {format_bytes(result.get('peak_memory_bytes'), digits=0)}"
        )
        reason = result.get("infeasible_reason") or result.get("error")
        if reason:
            line += f"  ({str(reason)[:90]})"
        self._print(line)

    def _print(self, text: str) -> None:
        total = "?" if self.total is None else str(self.total)
        elapsed = time.monotonic() - self.start
        line = f"[{self.done:>3}/{total} {elapsed:6.0f}s] {text}"
        print(line, file=self.stream or sys.stdout, flush=True)


def describe_params(config: dict[str, Any]) -> str:
    """The searched part of a trial config, compactly: ``norm=group gn_groups=4 lr=3.1e-04``."""
    parts = []
    for key, value in config.items():
        if key in _SKIP:
            continue
        shown = f"{value:.2e}" if isinstance(value, float) else str(value)
        parts.append(f"{key}={shown}")
    return " ".join(parts)


def _num(value: Any, spec: str) -> str:
    if not isinstance(value, int | float) or math.isnan(value):
        return "n/a"
    return format(value, spec)
