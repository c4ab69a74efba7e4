"""What changes while a run trains (:class:`RunState`), its checkpoints (tensors and plain
values only, read with ``weights_only=True``; the uncompiled, unwrapped model; the shuffle is a
function of (seed, epoch), so the loader has no state), and the :class:`Progress` of ``on_eval``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from tuner.engine.build import RunParts
from tuner.engine.result import RunResult
from tuner.errors import TunerError

__all__ = [
    "Progress",
    "RunState",
    "load_state",
    "make_state",
    "read_state_file",
    "write_state_file",
]

CHECKPOINT_VERSION = 1


@dataclass
class RunState:
    """The few things that change while a run trains.

    The clock (``train_time_s``) is the loop's wall time less evaluations and feasibility
    checks, not the steps' own spans: a GPU step only queues work, and timing steps alone would
    favour whatever lets the host run further ahead (``non_blocking``, the prefetcher).
    """

    step: int = 0  # counted from the start of the first run, across resumes
    train_time_s: float = 0.0
    # The time the schedule and the budget see: every worker's latest agreed clock (at a loss
    # flush) in a data-parallel run, so all take the same lr and stop at the same step.
    shared_time_s: float = 0.0
    first_step_unix_s: float | None = None  # wall clock at this run's first step
    losses: list[torch.Tensor] = field(default_factory=list)  # on the device, not yet flushed
    loss_curve: list[tuple[int, float]] = field(default_factory=list)  # (step, window mean)
    val_accuracy: float | None = None
    val_loss: float | None = None
    val_images: int = 0
    evaluations: int = 0  # made so far, across resumes (eval_every_s counts its multiples by it)
    evaluated_step: int | None = None  # the step of the latest evaluation
    time_to_target_s: float | None = None
    loader_images_per_second: float | None = None  # the loader alone, measured after training
    setup_time_s: float = 0.0  # from the run's start to its training loop: data, model, state
    eval_time_s: float = 0.0  # in evaluations proper, this process's run
    report_time_s: float = 0.0  # in the caller's on_eval (a search's report and checkpoint)
    _lap_start: float = field(default_factory=time.perf_counter)
    run_started: float = field(default_factory=time.perf_counter)  # wall_time_s counts from it

    def start_clock(self) -> None:
        self._lap_start = time.perf_counter()

    def lap(self) -> None:
        now = time.perf_counter()
        self.train_time_s += now - self._lap_start
        self._lap_start = now

    @contextmanager
    def clock_stopped(self) -> Iterator[None]:
        """Time inside the block is not training."""
        self.lap()
        try:
            yield
        finally:
            self.start_clock()


@dataclass(frozen=True)
class Progress:
    """What ``on_eval`` sees after each evaluation (``step`` counts across resumes). ``cut``:
    the last evaluation of a run its time budget cut, off the cadence (a search does not judge
    a trial by it: its final report follows)."""

    step: int
    epoch: float
    result: RunResult
    _state: Callable[[], dict[str, Any]]
    cut: bool = False

    def state_dict(self) -> dict[str, Any]:
        """A CPU copy to pass back as ``train(config, resume_state=...)`` (rank 0 writes it)."""
        return self._state()


def make_state(parts: RunParts, state: RunState) -> dict[str, Any]:
    rng: dict[str, Any] = {"torch": torch.get_rng_state()}
    if parts.device.type == "cuda":
        rng["cuda"] = torch.cuda.get_rng_state(parts.device)
    saved = {
        "version": CHECKPOINT_VERSION,
        "model": parts.model.state_dict(),
        "optimizer": parts.optimizer.state_dict(),
        "scheduler": {
            "progress": parts.schedule.progress(state.step, state.train_time_s),
            "train_time_s": state.train_time_s,
        },
        "scaler": parts.scaler.state_dict(),
        "step": state.step,
        "epoch": state.step / parts.schedule.steps_per_epoch,
        "rng": rng,
        "loss_curve": [[s, v] for s, v in state.loss_curve],
        "time_to_target_s": state.time_to_target_s,
        "val_accuracy": state.val_accuracy,
        "val_loss": state.val_loss,
        "val_images": state.val_images,
        "evaluations": state.evaluations,
        # What the meters measured so far (the last evaluation's result read them): a resumed
        # run reports over every segment (tuner.engine.meters).
        "throughput_windows": [list(w) for w in parts.throughput.measured],
        "memory_bytes": dict(parts.memory.measured),
    }
    return _cpu_copy(saved)


def load_state(parts: RunParts, saved: dict[str, Any]) -> RunState:
    """Load ``saved`` into ``parts``; the state to go on from."""
    parts.model.load_state_dict(saved["model"])
    parts.optimizer.load_state_dict(saved["optimizer"])
    if saved.get("scaler"):
        parts.scaler.load_state_dict(saved["scaler"])
    rng = saved.get("rng", {})
    if "torch" in rng:
        torch.set_rng_state(rng["torch"])
    if "cuda" in rng and parts.device.type == "cuda":
        torch.cuda.set_rng_state(rng["cuda"], parts.device)
    train_time_s = float(saved["scheduler"]["train_time_s"])
    parts.throughput.earlier = [
        (int(w[0]), int(w[1]), float(w[2]), float(w[3]))
        for w in saved.get("throughput_windows", [])
    ]
    parts.memory.earlier = {str(k): int(v) for k, v in saved.get("memory_bytes", {}).items()}
    return RunState(
        step=int(saved["step"]),
        train_time_s=train_time_s,
        shared_time_s=train_time_s,
        loss_curve=[(int(s), float(v)) for s, v in saved.get("loss_curve", [])],
        val_accuracy=saved.get("val_accuracy"),
        val_loss=saved.get("val_loss"),
        val_images=int(saved.get("val_images") or 0),
        evaluations=int(saved.get("evaluations") or 0),
        # A checkpoint is made at an evaluation: its step's evaluation is made.
        evaluated_step=int(saved["step"]) if saved.get("val_accuracy") is not None else None,
        time_to_target_s=saved.get("time_to_target_s"),
    )


def write_state_file(state: dict[str, Any], path: Path) -> None:
    torch.save(state, path)


def read_state_file(path: Path) -> dict[str, Any]:
    """Read a checkpoint without executing code (TunerError: unreadable, or not a state)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise TunerError(
            f"Checkpoint {path} is unreadable ({type(exc).__name__}); delete it to start that "
            "run afresh."
        ) from None
    if not isinstance(state, dict) or "model" not in state or "step" not in state:
        raise TunerError(f"Checkpoint {path} holds no training state; delete it.")
    return state


def _cpu_copy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: _cpu_copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_cpu_copy(v) for v in value)
    return value
