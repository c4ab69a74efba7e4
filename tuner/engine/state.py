"""Checkpoints of a run and the :class:`Progress` handed to ``on_eval``.

A checkpoint holds only tensors and plain Python values, so ``torch.load(path,
weights_only=True)`` reads it: the **uncompiled** model, the optimizer, the schedule position,
the GradScaler, the step/epoch counters and the RNG states (torch, CUDA, the loader's shuffle).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tuner.engine.build import Run
from tuner.engine.result import RunResult
from tuner.errors import TunerError

__all__ = [
    "CHECKPOINT_VERSION",
    "Progress",
    "load_state",
    "make_state",
    "read_state_file",
    "write_state_file",
]

CHECKPOINT_VERSION = 1
_WHAT_RAN = ("effective", "notes")  # RunResult's non-scalar fields that every report carries


@dataclass(frozen=True)
class Progress:
    """What ``on_eval`` sees after each evaluation.

    Attributes:
        step: training steps done (counting from the start of the first run, across resumes).
        epoch: ``step`` in epochs (fractional with ``eval_every_steps``).
        result: the run's result so far (``status="ok"``), the same fields as the final one.
    """

    step: int
    epoch: float
    result: RunResult
    _state: Callable[[], dict[str, Any]]

    @property
    def metrics(self) -> dict[str, Any]:
        """The scalar fields of :attr:`result` and what ran (``effective``, ``notes``): what a
        trial reports, the same as its final report carries."""
        return {
            k: v
            for k, v in self.result.to_dict().items()
            if not isinstance(v, list | dict) or k in _WHAT_RAN
        }

    def state_dict(self) -> dict[str, Any]:
        """A checkpoint to pass back as ``train(config, resume_state=...)``: a CPU copy."""
        return self._state()


def make_state(run: Run) -> dict[str, Any]:
    """A CPU copy of the run's state, made of tensors and plain values only."""
    rng: dict[str, Any] = {"torch": torch.get_rng_state()}
    if run.device.type == "cuda":
        rng["cuda"] = torch.cuda.get_rng_state(run.device)
    if run.data.generator is not None:
        rng["loader"] = run.data.generator.get_state()
    state = {
        "version": CHECKPOINT_VERSION,
        "model": run.model.state_dict(),
        "optimizer": run.optimizer.state_dict(),
        "scheduler": {"progress": run.progress(), "train_time_s": run.train_time_s},
        "scaler": run.scaler.state_dict(),
        "step": run.step,
        "epoch": run.epoch,
        "rng": rng,
        "loss_curve": [[s, v] for s, v in run.loss_curve],
        "time_to_target_s": run.time_to_target_s,
        "val_accuracy": run.val_accuracy,
        "val_loss": run.val_loss,
        "val_images": run.val_images,
    }
    return _cpu_copy(state)


def write_state_file(state: dict[str, Any], path: Path) -> None:
    """Save a :meth:`Progress.state_dict` to ``path``."""
    torch.save(state, path)


def read_state_file(path: Path) -> dict[str, Any]:
    """Read a checkpoint without executing code (``weights_only=True``).

    Raises:
        TunerError: the file is missing, truncated, or holds something other than a state.
    """
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


def load_state(run: Run, state: dict[str, Any]) -> None:
    """Continue ``run`` from ``state`` (as :func:`make_state` wrote it)."""
    run.model.load_state_dict(state["model"])
    run.optimizer.load_state_dict(state["optimizer"])
    if state.get("scaler"):
        run.scaler.load_state_dict(state["scaler"])
    run.step = int(state["step"])
    run.train_time_s = float(state["scheduler"]["train_time_s"])
    run.loss_curve = [(int(s), float(v)) for s, v in state.get("loss_curve", [])]
    run.time_to_target_s = state.get("time_to_target_s")
    run.val_accuracy, run.val_loss = state.get("val_accuracy"), state.get("val_loss")
    run.val_images = int(state.get("val_images") or 0)
    rng = state.get("rng", {})
    if "torch" in rng:
        torch.set_rng_state(rng["torch"])
    if "cuda" in rng and run.device.type == "cuda":
        torch.cuda.set_rng_state(rng["cuda"], run.device)
    if "loader" in rng and run.data.generator is not None:
        run.data.generator.set_state(rng["loader"])


def _cpu_copy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: _cpu_copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_cpu_copy(v) for v in value)
    return value
