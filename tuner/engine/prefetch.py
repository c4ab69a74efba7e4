"""The prefetchers. ``prefetch=cuda_stream``: copy the next batch on a side CUDA stream while
this one computes. ``host_prefetch``: a background thread keeps the next host batches ready
(:class:`HostPrefetcher`, the CPU form: it overlaps loading with the step when no DataLoader
worker does).

Batches cross the bus as uint8 (4x fewer bytes than float32) and are normalized on the GPU,
on the side stream, so the compute stream only waits for a batch that is already there.

Correctness: the compute stream ``wait_stream``s the side stream before using a batch, and the
batch's tensors ``record_stream`` the compute stream so the caching allocator does not hand
their memory to the next copy while kernels still read it.

Memory: the side stream is created **once per prefetcher**, not once per epoch. The caching
allocator keeps freed blocks in per-stream pools; a fresh stream every epoch (as some popular
prefetchers do) strands the old stream's blocks, and reserved memory grows epoch after epoch.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

import torch

from tuner.engine.data import normalize

__all__ = ["HOST_DEPTH", "CudaPrefetcher", "HostPrefetcher"]

Batch = tuple[torch.Tensor, torch.Tensor]


class CudaPrefetcher:
    """Wrap a loader of host (ideally pinned) uint8 ``(images, labels)`` that has ``len()``;
    yield normalized batches on ``device`` (``mean``, ``std`` per channel, in [0, 1] units)."""

    def __init__(
        self,
        loader: Any,
        device: torch.device,
        mean: tuple[float, ...],
        std: tuple[float, ...],
        *,
        channels_last: bool = False,
    ) -> None:
        if device.type != "cuda":
            raise ValueError("CudaPrefetcher needs a CUDA device")
        self.loader, self.device, self.channels_last = loader, device, channels_last
        self.stream = torch.cuda.Stream(device)
        self.mean = torch.tensor(mean, device=device).view(1, -1, 1, 1)
        self.std = torch.tensor(std, device=device).view(1, -1, 1, 1)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Batch]:
        batches = iter(self.loader)
        upcoming = self._preload(batches)
        while upcoming is not None:
            compute = torch.cuda.current_stream(self.device)
            compute.wait_stream(self.stream)
            images, labels = upcoming
            images.record_stream(compute)
            labels.record_stream(compute)
            upcoming = self._preload(batches)
            yield images, labels

    def _preload(self, batches: Iterator[Batch]) -> Batch | None:
        try:
            images, labels = next(batches)
        except StopIteration:
            return None
        with torch.cuda.stream(self.stream):
            images = images.to(self.device, non_blocking=True)
            labels = labels.to(self.device, non_blocking=True)
            images = normalize(images, self.mean, self.std, channels_last=self.channels_last)
        return images, labels


HOST_DEPTH = 2  # batches the host thread keeps ready: two, as a DataLoader worker keeps by default
_END = object()


class HostPrefetcher:
    """Wrap a loader that has ``len()``: a daemon thread iterates it and keeps up to ``depth``
    batches ready while the step runs. Loading (decode, augment, collate) releases the GIL for
    most of its time, so on a second core it overlaps the training step.

    An exception in the thread is raised where the batch would have come; an iteration left
    early (the run stopped) ends its thread at its next put.
    """

    def __init__(self, loader: Any, depth: int = HOST_DEPTH) -> None:
        self.loader, self.depth = loader, depth

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        ready: queue.Queue[Any] = queue.Queue(self.depth)
        stop = threading.Event()
        # The CUDA device is per thread: the loader's pinning must use this worker's, not GPU 0.
        device = torch.cuda.current_device() if torch.cuda.is_initialized() else None
        thread = threading.Thread(target=self._fill, args=(ready, stop, device), daemon=True)
        thread.start()
        try:
            while (item := ready.get()) is not _END:
                if isinstance(item, _Failed):
                    raise item.error
                yield item
        finally:
            stop.set()
            while thread.is_alive():  # unblock a put waiting on a full queue
                try:
                    ready.get_nowait()
                except queue.Empty:
                    thread.join(0.01)

    def _fill(self, ready: queue.Queue[Any], stop: threading.Event, device: int | None) -> None:
        try:
            if device is not None:
                torch.cuda.set_device(device)
            for batch in self.loader:
                if stop.is_set():
                    return
                ready.put(batch)
            ready.put(_END)
        except BaseException as error:  # handed to the consumer, raised there
            ready.put(_Failed(error))


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error
