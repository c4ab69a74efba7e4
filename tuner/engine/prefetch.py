"""The prefetchers: ``prefetch=cuda_stream`` copies the next batch (as uint8: 4x fewer bytes)
and normalizes it on a side CUDA stream while this one computes; ``host_prefetch`` keeps the
next host batches ready in a thread (overlapping loading where no DataLoader worker does).

The compute stream ``wait_stream``s the side stream, and each batch ``record_stream``s the
compute stream, so the allocator does not hand its memory to the next copy while kernels read
it. The side stream is made **once per prefetcher**: a fresh one per epoch (as some popular
prefetchers do) strands the old stream's pool, and reserved memory grows epoch after epoch.
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
    """Normalized batches on ``device`` from a loader of host (ideally pinned) uint8 batches."""

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
    """A daemon thread keeps up to ``depth`` batches of ``loader`` ready (loading releases the
    GIL most of its time); its exception is raised where the batch would have come, and an
    iteration left early ends it at its next put."""

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
