"""Meters: steady-state throughput and data wait, peak memory, and the environment.

Throughput is measured over windows of steps whose edges synchronize the device, so the clock
covers the GPU work that was queued, not just the Python that queued it. The first
``warmup_steps`` steps of a run (and of a resumed run: compile happens again) are excluded.

Peak memory on CUDA is ``max_memory_reserved`` (what the process holds: the number a memory
budget must use) with ``max_memory_allocated`` beside it. On CPU it is the growth of the
process's peak RSS over the run: the kernel's high-water mark ``VmHWM`` is reset at the start
(``/proc/self/clear_refs`` = 5, Linux >= 4.0), so a peak from earlier work in the same process
does not hide this run's. Where that reset is not allowed, a thread samples ``VmRSS`` every 5 ms
instead (it can miss peaks shorter than that). Freed memory the allocator keeps from an earlier
run in the same process is reused, so a second run in one process reads lower; DataLoader worker
processes are not counted.
"""

from __future__ import annotations

import gc
import platform
import re
import threading
import time
from pathlib import Path
from typing import Any

import torch

__all__ = ["MemoryMeter", "ThroughputMeter", "environment", "synchronize"]

WINDOW_STEPS = 10  # steps per throughput window: the spread is over these windows


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on CPU, where work is synchronous)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class ThroughputMeter:
    """Images/s and data-wait fraction over steady-state steps only.

    The loop calls :meth:`start` before its first step, :meth:`step` after each, and
    :meth:`pause` / :meth:`resume` around evaluations so they are not timed.
    """

    def __init__(self, device: torch.device, warmup_steps: int) -> None:
        self.device, self.warmup_steps = device, warmup_steps
        self.steps_seen = 0
        self.windows: list[tuple[int, int, float, float]] = []  # (steps, images, s, wait s)
        self._open: list[float] | None = None  # [start time, images, steps, wait s]
        self.warmup_time_s: float | None = None
        self._started = 0.0

    def start(self) -> None:
        self._started = time.perf_counter()
        self.resume()

    def step(self, images: int, data_wait_s: float) -> None:
        """Count one finished training step (call after the optimizer step is queued)."""
        self.steps_seen += 1
        if self._open is not None:
            self._open[1] += images
            self._open[2] += 1
            self._open[3] += data_wait_s
            if self._open[2] >= WINDOW_STEPS:
                self.pause()
                self.resume()
        elif self.steps_seen == self.warmup_steps:
            synchronize(self.device)
            self.warmup_time_s = time.perf_counter() - self._started
            self.resume()

    def resume(self) -> None:
        """Open a window now, unless still in warm-up."""
        if self.steps_seen >= self.warmup_steps:
            synchronize(self.device)
            self._open = [time.perf_counter(), 0, 0, 0.0]

    def pause(self) -> None:
        """Close the open window (at a window edge, before an evaluation, at the end)."""
        if self._open is None:
            return
        synchronize(self.device)
        start, images, steps, wait = self._open
        if steps:
            self.windows.append((int(steps), int(images), time.perf_counter() - start, wait))
        self._open = None

    def summary(self) -> dict[str, Any]:
        """images_per_second (overall and per full window), data_wait_fraction, step time."""
        steps = sum(w[0] for w in self.windows)
        seconds = sum(w[2] for w in self.windows)
        if not steps or seconds <= 0:
            return {"measured_steps": 0, "warmup_time_s": self.warmup_time_s}
        full = [w[1] / w[2] for w in self.windows if w[0] >= WINDOW_STEPS // 2 and w[2] > 0]
        return {
            "images_per_second": sum(w[1] for w in self.windows) / seconds,
            "images_per_second_windows": full,
            "data_wait_fraction": sum(w[3] for w in self.windows) / seconds,
            "step_time_s": seconds / steps,
            "measured_steps": steps,
            "warmup_time_s": self.warmup_time_s,
        }


class MemoryMeter:
    """Peak memory of one run: CUDA reserved/allocated, or CPU peak RSS growth."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._sampler: _RssSampler | None = None
        if device.type == "cuda":
            gc.collect()  # blocks an earlier run left cached would otherwise count as this run's
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
            return
        self.baseline = _status_kib("VmRSS") * 1024
        if not _reset_rss_peak():
            self._sampler = _RssSampler()

    def read(self) -> dict[str, Any]:
        if self.device.type == "cuda":
            reserved = torch.cuda.max_memory_reserved(self.device)
            return {
                "peak_memory_bytes": reserved,
                "memory_kind": "cuda_max_memory_reserved",
                "peak_memory_reserved_bytes": reserved,
                "peak_memory_allocated_bytes": torch.cuda.max_memory_allocated(self.device),
            }
        peak = self._sampler.read() if self._sampler is not None else _status_kib("VmHWM") * 1024
        return {"peak_memory_bytes": max(0, peak - self.baseline),
                "memory_kind": "cpu_peak_rss_growth"}  # fmt: skip

    def close(self) -> None:
        """Stop the RSS sampling thread, if one runs."""
        if self._sampler is not None:
            self._sampler.stop()


def _status_kib(key: str) -> int:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    match = re.search(rf"^{key}:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) if match else 0


def _reset_rss_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


class _RssSampler:
    def __init__(self, interval_s: float = 0.005) -> None:
        self.peak = _status_kib("VmRSS") * 1024
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval_s,), daemon=True)
        self._thread.start()

    def _run(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self.peak = max(self.peak, _status_kib("VmRSS") * 1024)

    def read(self) -> int:
        return max(self.peak, _status_kib("VmRSS") * 1024)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


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
