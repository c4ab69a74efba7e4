"""Meters: steady-state throughput and data wait, peak memory, and the environment.

Throughput windows synchronize the device at their edges (the clock covers the queued GPU
work, not just the Python that queued it); a run's first ``warmup_steps`` (a resumed run's too:
compile happens again) are left out. A resumed run carries its earlier segments' windows and
peak (``earlier``), so one restored at its last step reports what was measured, not nothing.
"""

from __future__ import annotations

import contextlib
import gc
import math
import platform
import time
from collections.abc import Iterator
from typing import Any

import torch

from tuner.engine.distributed import World
from tuner.stats import median_interval

__all__ = ["MemoryMeter", "ThroughputMeter", "environment", "synchronize"]

WINDOW_STEPS = 10  # steps per throughput window: the spread is over these windows


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on CPU, where work is synchronous)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class ThroughputMeter:
    """Images/s and data-wait fraction over steady-state steps (:meth:`pause` /
    :meth:`resume` around what is not timed)."""

    def __init__(self, device: torch.device, warmup_steps: int) -> None:
        self.device, self.warmup_steps = device, warmup_steps
        self.warm = warmup_steps == 0  # past the warm-up: windows may open
        self.windows: list[tuple[int, int, float, float]] = []  # (steps, images, s, wait s)
        self._open: list[float] | None = None  # [start time, images, steps, wait s]
        self.warmup_time_s: float | None = None
        self._started = 0.0
        self.earlier: list[tuple[int, int, float, float]] = []  # a checkpoint's global windows
        self.measured: list[tuple[int, int, float, float]] = []  # the last summary's: to save

    def start(self) -> None:
        self._started = time.perf_counter()
        self.resume()

    def step(self, taken: int, images: int, data_wait_s: float) -> None:
        """Count the ``taken``-th step of this process (after its optimizer step is queued)."""
        if self._open is not None:
            self._open[1] += images
            self._open[2] += 1
            self._open[3] += data_wait_s
            if self._open[2] >= WINDOW_STEPS:
                self.pause()
                self.resume()
        elif taken == self.warmup_steps:
            synchronize(self.device)
            self.warmup_time_s = time.perf_counter() - self._started
            self.warm = True
            self.resume()

    def resume(self) -> None:
        if self.warm:
            synchronize(self.device)
            self._open = [time.perf_counter(), 0, 0, 0.0]

    def pause(self) -> None:
        if self._open is None:
            return
        synchronize(self.device)
        start, images, steps, wait = self._open
        if steps:
            self.windows.append((int(steps), int(images), time.perf_counter() - start, wait))
        self._open = None

    def summary(self, world: World) -> dict[str, Any]:
        """images/s (median window, and each full one), data wait, step time of every worker
        together (a collective)."""
        windows = self.earlier + self._global_windows(world)
        self.measured = windows
        (warmup,) = world.max([-1.0 if self.warmup_time_s is None else self.warmup_time_s])
        warmup_time_s = None if warmup < 0 else warmup
        steps = sum(w[0] for w in windows)
        seconds = sum(w[2] for w in windows)
        if not steps or seconds <= 0:
            return {"measured_steps": 0, "warmup_time_s": warmup_time_s}
        full = [w[1] / w[2] for w in windows if w[0] >= WINDOW_STEPS // 2 and w[2] > 0]
        # Steady state is the median window (robust to one hiccup); the interval is its spread.
        spread = median_interval(full)
        overall = sum(w[1] for w in windows) / seconds
        return {
            "images_per_second": spread.median if spread.n >= 2 else overall,
            "images_per_second_low": None if math.isnan(spread.low) else spread.low,
            "images_per_second_high": None if math.isnan(spread.high) else spread.high,
            "images_per_second_windows": full,
            "data_wait_fraction": sum(w[3] for w in windows) / seconds,
            "step_time_s": seconds / steps,
            "measured_steps": steps,
            "warmup_time_s": warmup_time_s,
        }

    def _global_windows(self, world: World) -> list[tuple[int, int, float, float]]:
        """Each window over every worker (they close at the same steps): images summed, the
        slowest's seconds, the mean wait."""
        if world.size == 1 or not self.windows:
            return self.windows
        n = len(self.windows)
        summed = world.sum([w[1] for w in self.windows] + [w[3] for w in self.windows])
        slowest = world.max([w[2] for w in self.windows])
        waits = [s / world.size for s in summed[n:]]
        rows = zip(self.windows, summed[:n], slowest, waits, strict=True)
        return [(w[0], int(images), seconds, wait) for w, images, seconds, wait in rows]


class MemoryMeter:
    """Peak memory of one run, a number that does not depend on what ran before it.

    On CUDA: ``max_memory_reserved`` (what a budget must use) after freeing the cache and
    resetting the peaks, with ``max_memory_allocated``. On CPU the resident size says little
    (the allocator keeps what an earlier run freed), so the **training state** is counted on
    the last warm-up step: parameters, optimizer state, the storages autograd saves for
    backward (``saved_tensors_hooks``, parameters excluded) and gradients; the peak is
    ``parameters + optimizer + max(activations + kept gradients, gradients)`` (gradients kept
    through the next forward unless ``set_to_none``). Exact for what it counts, in any process;
    transient buffers, the data and loader workers are left out.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._saved: dict[int, int] = {}
        self._state: dict[str, int] | None = None
        self.earlier: dict[str, int] = {}  # a checkpoint's byte counts (earlier segments)
        self.measured: dict[str, int] = {}  # the last read's byte counts: to save
        if device.type == "cuda":
            torch.cuda.init()  # an explicit index (cuda:0) does not initialise CUDA by itself
            gc.collect()  # blocks an earlier run left cached would otherwise count as this run's
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)

    @contextlib.contextmanager
    def activations(self, model: torch.nn.Module, *, enabled: bool) -> Iterator[None]:
        """Count the storages autograd saves for backward inside this block."""
        if not enabled:
            yield
            return
        own = {p.untyped_storage().data_ptr() for p in model.parameters()}
        self._saved = {}

        def pack(tensor: torch.Tensor) -> torch.Tensor:
            storage = tensor.untyped_storage()
            if storage.data_ptr() not in own:
                self._saved[storage.data_ptr()] = storage.nbytes()
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            yield

    def record_state(
        self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, *, keeps_grads: bool
    ) -> None:
        """After the counted step: the training state's bytes."""
        params = list(model.parameters())
        weights = sum(p.nbytes for p in params)
        grads = sum(p.nbytes for p in params if p.requires_grad)
        held = (t for s in optimizer.state.values() for t in s.values())
        state = sum(t.nbytes for t in held if isinstance(t, torch.Tensor))
        activations = sum(self._saved.values())
        self._state = {
            "memory_parameters_bytes": weights,
            "memory_gradients_bytes": grads,
            "memory_optimizer_bytes": state,
            "memory_activations_bytes": activations,
            "training_state_bytes": weights
            + state
            + max(activations + (grads if keeps_grads else 0), grads),
        }

    def read(self, world: World) -> dict[str, Any]:
        """The peak and its breakdown: the largest of every worker's (a collective)."""
        fields: dict[str, Any] = dict(self._state or {})
        peak_state = fields.pop("training_state_bytes", None)
        if self.device.type == "cuda":
            reserved = torch.cuda.max_memory_reserved(self.device)
            fields.update(
                peak_memory_bytes=reserved,
                memory_kind="cuda_max_memory_reserved",
                peak_memory_reserved_bytes=reserved,
                peak_memory_allocated_bytes=torch.cuda.max_memory_allocated(self.device),
            )
        else:
            fields.update(peak_memory_bytes=peak_state, memory_kind="cpu_training_state")
        counts = sorted(k for k, v in fields.items() if isinstance(v, int))
        peaks = world.max([fields[k] for k in counts])
        fields.update({k: int(v) for k, v in zip(counts, peaks, strict=True)})
        if self.earlier and not isinstance(fields.get("peak_memory_bytes"), int):
            fields.update(self.earlier)  # this segment counted nothing yet: the earlier count
        elif self.earlier:  # the peak of the run is the largest of its segments'
            fields["peak_memory_bytes"] = max(
                fields["peak_memory_bytes"], self.earlier.get("peak_memory_bytes", 0)
            )
        self.measured = {k: v for k, v in fields.items() if isinstance(v, int)}
        return fields


def environment(device: torch.device) -> dict[str, Any]:
    """torch/CUDA/timm versions and the device's name."""
    import timm

    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = platform.processor() or platform.machine()
        name = f"{name} ({torch.get_num_threads()} threads)"
    return {
        "device": str(device),
        "device_name": name,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda if device.type == "cuda" else None,
        "timm_version": timm.__version__,
    }


LOADER_BATCHES = 8  # batches timed when the loader is measured alone (after one untimed)


def loader_images_per_second(loader: Any, world: World) -> float | None:
    """The train loader alone: images/s over :data:`LOADER_BATCHES` batches after one untimed,
    summed over the workers (a collective). ``None`` when too short or failed: a figure taken
    after training never fails the run it describes."""
    rate = 0.0
    try:
        rate = _rate(loader)
    except Exception:
        rate = math.nan
    rates = world.sum([rate if rate > 0 else math.nan])
    return rates[0] if math.isfinite(rates[0]) else None


def _rate(loader: Any) -> float:
    batches, images = iter(loader), 0
    try:
        next(batches)
        started = time.perf_counter()
        for _ in range(LOADER_BATCHES):
            images += int(next(batches)[1].shape[0])
        return images / (time.perf_counter() - started)
    except StopIteration:
        return math.nan
    finally:
        del batches  # ends its workers now, not at the next collection
