"""One run built and warmed up once (memory counted as in a run), then timed in short windows
of steps: CPU comparisons without a build per measurement (:mod:`tuner.compare.trust`).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from typing import Any

import torch

from tuner.config import TrainConfig
from tuner.engine.build import RunParts, build_parts, resolve_device
from tuner.engine.loop import Diverged, batches, failure, take_step, what_ran
from tuner.engine.meters import MemoryMeter, environment, synchronize
from tuner.engine.result import RunResult
from tuner.engine.state import RunState

__all__ = ["WindowRun", "failed_build"]


class WindowRun:
    """``config`` built once (TunerError: bad input); :meth:`window` times steps of it."""

    def __init__(self, config: TrainConfig, *, planned_steps: int) -> None:
        device = resolve_device(config.device)
        self._memory = MemoryMeter(device)
        self._parts: RunParts | None = build_parts(config, device, self._memory)
        self._state = RunState()
        self._batches: Iterator[Any] = batches(self._parts, self._state)
        self._planned = max(1, planned_steps)
        loader = self._parts.data.train_loader
        workers = getattr(loader, "num_workers", 0)  # a DataLoader's; other loaders: none
        # Batches its loader workers queue ahead: taken untimed at each window's start.
        self.queued = workers * (getattr(loader, "prefetch_factor", None) or 0)
        self._environment = environment(device)
        self.failed: RunResult | None = None

    def warm_up(self) -> RunResult | None:
        """The warm-up steps, memory counted on the last; a failure's result, else ``None``."""
        parts = self._live()
        count = max(1, parts.effective.warmup_steps)  # raised for compile's warm-up
        try:
            for i in range(count):
                self._one_step(count_memory=i == count - 1)
            self._check_loss()
        except Exception as exc:  # OOM, NaN, a crash: a result, as in a run
            return self._fail(exc)
        return None

    def window(self, steps: int) -> RunResult:
        """Time ``steps`` steps, synchronized at both ends. The batches loader workers queued
        while other arms ran are taken first, untimed: no window times work done outside it."""
        parts = self._live()
        waited = 0.0
        try:
            for _ in range(self.queued):
                self._one_step(count_memory=False)
            synchronize(parts.device)
            start = time.perf_counter()
            for _ in range(steps):
                waited += self._one_step(count_memory=False)
            synchronize(parts.device)
            seconds = time.perf_counter() - start
            self._check_loss()
        except Exception as exc:
            return self._fail(exc)
        images = steps * parts.config.batch_size
        return self._result(
            status="ok",
            images_per_second=images / seconds,
            step_time_s=seconds / steps,
            data_wait_fraction=waited / seconds,
            measured_steps=steps,
            train_time_s=seconds,
        )

    def close(self) -> None:
        self._parts, self._batches = None, iter(())
        gc.collect()

    def _live(self) -> RunParts:
        if self._parts is None:
            raise RuntimeError("this WindowRun was closed or failed")
        return self._parts

    def _one_step(self, *, count_memory: bool) -> float:
        """One step at the schedule's lr; the seconds waited for its batch."""
        parts, state = self._live(), self._state
        lr = parts.schedule.lr_at(min(1.0, (state.step + 1) / self._planned))
        return take_step(parts, state, self._batches, lr, count_memory=count_memory)[0]

    def _check_loss(self) -> None:
        losses, self._state.losses = self._state.losses, []
        if losses and not bool(torch.isfinite(torch.stack(losses)).all()):
            raise Diverged(f"training loss became non-finite by step {self._state.step}")

    def _fail(self, exc: BaseException) -> RunResult:
        status, error = failure(exc)
        self.failed = self._result(status=status, error=error)
        self.close()  # the arm is out: what it built goes
        return self.failed

    def _result(self, **fields: Any) -> RunResult:
        parts = self._live()  # a failed arm's result is made before it closes
        fields.update(self._memory.read(parts.world), **self._environment, **what_ran(parts))
        fields.update(steps=self._state.step, global_batch_size=parts.config.batch_size)
        return RunResult(**fields)


def failed_build(exc: BaseException) -> RunResult:
    """The result of a build that failed other than on bad input (out of memory)."""
    status, error = failure(exc)
    return RunResult(status=status, error=error)
