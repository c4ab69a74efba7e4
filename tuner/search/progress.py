"""Console progress: one line per started and finished trial instead of Ray's wide tables."""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

from ray.tune import Callback

from tuner import record
from tuner.units import format_bytes

__all__ = ["ProgressPrinter", "describe_params"]

_SKIP = {"model", "model_kwargs", "data", "img_size", "epochs", "steps", "time_budget_s",
         "eval_every_steps", "warmup_steps", "max_eval_batches", "seed", "device"}  # fmt: skip
_KIND_WIDTH = max(len(kind) for kind in record.KINDS)


class ProgressPrinter(Callback):
    """Prints ``[done/total] kind trial  img/s  acc  peak`` as trials finish, the kind in the
    record's words (:func:`tuner.record.classify`)."""

    def __init__(self, *, total: int | None, stream: TextIO | None = None) -> None:
        self.total = total
        self.stream = stream  # None: sys.stdout at print time (Ray pickles this callback)
        self.done = 0
        self.start = time.monotonic()
        self.started: set[str] = set()  # a trial Ray retries is not started again

    def setup(self, **info: Any) -> None:
        """Each run (also a resumed one, which unpickles this callback) counts from now."""
        self.done = 0
        self.start = time.monotonic()
        self.started = set()

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        if trial.trial_id not in self.started:
            self.started.add(trial.trial_id)
            self._print(f"start  {trial.trial_id}  {describe_params(trial.config)}")

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._finished(trial, crashed=False)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._finished(trial, crashed=True)

    def _finished(self, trial: Any, *, crashed: bool) -> None:
        self.done += 1
        result = trial.last_result or {}
        kind = record.classify(result, ended=True, crashed=crashed)
        line = (
            f"{kind:<{_KIND_WIDTH}} {trial.trial_id}"
            f"  {_num(result.get('images_per_second'), '.1f')} img/s"
            f"  acc {_num(result.get('val_accuracy'), '.3f')}"
            f"  peak {format_bytes(result.get('peak_memory_bytes'), digits=0)}"
        )
        reason = result.get(record.INFEASIBLE_REASON) or result.get(record.ERROR)
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
