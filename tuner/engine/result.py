"""The typed result of one training run: what the engine measured, ready for JSON."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from tuner.units import json_ready

__all__ = [
    "DATA_BOUND_WAIT",
    "TIME_BUDGET_CUT",
    "Bound",
    "MemoryKind",
    "RunResult",
    "RunStatus",
    "bound_of",
    "time_budget_note",
]

RunStatus = Literal["ok", "oom", "diverged", "error"]
Bound = Literal["data", "compute"]
# The share of step time spent waiting for data from which a run is data-bound: removing that
# wait would make it at least 1.33x faster, a gain worth a change to the input pipeline.
DATA_BOUND_WAIT = 0.25


def bound_of(data_wait_fraction: float | None) -> Bound | None:
    """``data`` from :data:`DATA_BOUND_WAIT` of the step time waiting, else ``compute``."""
    if data_wait_fraction is None:
        return None
    return "data" if data_wait_fraction >= DATA_BOUND_WAIT else "compute"


# How a run's notes start when its time budget ended it before its steps or epochs did.
TIME_BUDGET_CUT = "cut by its time budget"


def time_budget_note(budget_s: float, steps: int, planned_steps: int) -> str:
    return (
        f"{TIME_BUDGET_CUT}: time_budget_s={budget_s:g} ended it after {steps} of "
        f"{planned_steps} planned steps ({steps / planned_steps:.0%}); its accuracy is a shorter "
        "run's (raise time_budget_s, or set it to none, to train the whole run)"
    )


# Which number peak_memory_bytes is: CUDA's reserved (what the process holds on the device,
# the number a memory budget must use) or, on CPU, the counted training state (parameters,
# optimizer state, saved activations, gradients; see tuner.engine.meters.MemoryMeter).
MemoryKind = Literal["cuda_max_memory_reserved", "cpu_training_state"]


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """One run's measurements. ``None`` means "not measured" (e.g. the run failed first)."""

    status: RunStatus
    error: str | None = None
    # The failing run's traceback (the user's code in it): kept for the trial's folder, not
    # reported as a trial key (tuner.record).
    error_traceback: str | None = None

    # Throughput over steady-state steps only (warm-up and compile excluded).
    images_per_second: float | None = None  # of every worker together (global)
    # The interval of the median per-window rate (tuner.stats.median_interval): the spread.
    images_per_second_low: float | None = None
    images_per_second_high: float | None = None
    images_per_second_windows: list[float] = field(default_factory=list)  # per window
    data_wait_fraction: float | None = None  # of measured step time spent waiting for a batch
    # The train loader alone, no training, in the run's own process after it trained (global).
    loader_images_per_second: float | None = None
    bound: Bound | None = None  # data or compute: bound_of (above)
    step_time_s: float | None = None  # mean steady-state step time
    measured_steps: int = 0

    # Memory.
    peak_memory_bytes: int | None = None
    memory_kind: MemoryKind | None = None
    peak_memory_allocated_bytes: int | None = None  # CUDA max_memory_allocated
    peak_memory_reserved_bytes: int | None = None  # CUDA max_memory_reserved
    # The training state, counted on one step (any device): what the peak is made of.
    memory_parameters_bytes: int | None = None
    memory_gradients_bytes: int | None = None
    memory_optimizer_bytes: int | None = None
    memory_activations_bytes: int | None = None  # saved for backward

    # Quality.
    val_accuracy: float | None = None
    val_loss: float | None = None
    val_images: int = 0  # images the accuracy was measured on (its binomial interval's n)
    train_loss: float | None = None  # mean over the last logging window
    train_loss_curve: list[tuple[int, float]] = field(default_factory=list)  # (step, loss)
    time_to_target_s: float | None = None  # training seconds until val_accuracy >= target

    # Progress.
    world_size: int = 1  # data-parallel workers; images/s and memory are over all of them
    global_batch_size: int | None = None  # images per optimizer step: world_size x batch_size
    steps: int = 0
    # The steps the run's budget holds (its steps, images or epochs); None: a time budget only.
    # A run that ended with fewer was cut by its time budget.
    planned_steps: int | None = None
    epochs: float = 0.0
    images_seen: int = 0
    train_time_s: float = 0.0  # wall time of the training loop, evaluation excluded
    # This process's run (rank 0's in a data-parallel run): where the rest of wall_time_s went.
    setup_time_s: float = 0.0  # before the training loop: data, model, optimizer, restore
    eval_time_s: float = 0.0  # scoring the validation split
    report_time_s: float = 0.0  # the caller's hook after each evaluation: a search's report
    skipped_images: int = 0  # unreadable image files skipped (config.skip_unreadable_images)
    wall_time_s: float = 0.0  # the whole run: build, compile, train, evaluate
    first_step_unix_s: float | None = None  # wall clock (time.time) when the first step began
    warmup_time_s: float | None = None  # wall time of the excluded warm-up steps

    # What actually ran (a technique that cannot run here falls back and says so).
    effective: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    # Environment.
    device: str = "cpu"
    device_name: str = ""
    torch_version: str = ""
    cuda_version: str | None = None
    timm_version: str = ""
    num_parameters: int | None = None

    config: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def cut_by_time_budget(self) -> bool:
        return any(note.startswith(TIME_BUDGET_CUT) for note in self.notes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (non-finite floats become ``None``)."""
        return json_ready(dataclasses.asdict(self))

    def to_json(self) -> str:
        """One line of JSON, as ``tuner train --json`` prints it."""
        return json.dumps(self.to_dict(), sort_keys=True)
