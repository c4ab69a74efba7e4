"""Data-parallel runs: the process group a launcher set up, as one small :class:`World` (without
a group, one process whose reductions return their input: a single run is the size-1 case).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

__all__ = ["World", "launched_group"]


@dataclass(frozen=True)
class World:
    """This process's place among the workers of one run."""

    rank: int = 0
    size: int = 1

    @classmethod
    def current(cls) -> World:
        """The initialized process group's rank and size, else one process."""
        if dist.is_available() and dist.is_initialized():
            return cls(dist.get_rank(), dist.get_world_size())
        return cls()

    def local_cuda(self) -> torch.device:
        """This worker's GPU (``LOCAL_RANK``), made current before anything touches CUDA (no
        context on GPU 0; nccl's collectives run there)."""
        local = int(os.environ.get("LOCAL_RANK", 0))
        device = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(device)
        return device

    def sum(self, values: Sequence[float]) -> list[float]:
        return self._reduce(values, dist.ReduceOp.SUM)

    def max(self, values: Sequence[float]) -> list[float]:
        return self._reduce(values, dist.ReduceOp.MAX)

    def decide(self, flag: bool) -> bool:
        """Rank 0's decision, on every rank (a hook's "stop" must stop every worker)."""
        if self.size == 1:
            return flag
        tensor = _tensor([float(flag)])
        dist.broadcast(tensor, src=0)
        return bool(tensor.item())

    def _reduce(self, values: Sequence[float], op: dist.ReduceOp) -> list[float]:
        if self.size == 1:
            return list(values)
        tensor = _tensor(values)
        dist.all_reduce(tensor, op=op)
        return tensor.tolist()


@contextlib.contextmanager
def launched_group(*, cuda: bool) -> Iterator[World]:
    """Under torchrun (``WORLD_SIZE`` set, no group yet) the process group over its workers
    (nccl on GPUs, gloo on CPUs), closed at the end; otherwise the world as it is."""
    if "WORLD_SIZE" not in os.environ or dist.is_initialized():
        yield World.current()
        return
    dist.init_process_group("nccl" if cuda else "gloo", init_method="env://")
    try:
        yield World.current()
    finally:
        dist.destroy_process_group()


def _tensor(values: Sequence[float]) -> torch.Tensor:
    # nccl reduces CUDA tensors only; gloo (CPU workers) reduces host tensors.
    cuda = dist.get_backend() == "nccl"
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    return torch.tensor(list(values), dtype=torch.float64, device=device)
