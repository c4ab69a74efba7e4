"""Warm ranks for data-parallel trials: N-1 rank processes and their torch process group, kept
by the trial's own process (rank 0) from one trial to the next.

A trial of world size N is a plain Tune trial whose resources are N bundles (one per rank):
its trainable's process is rank 0 and reports to Tune as a one-process trial does; ranks 1..N-1
are :class:`RankWorker` actors in the trial's other bundles. Tune reuses the trainable's process
for the next trial of the same resources (``reuse_actors``), and the pool with it: a later
trial starts no process, imports nothing and joins no group (bench/data_parallel_overhead.py).
The workers are the trainable's own actors: they die with it (an early stop that leaves no
trial to reuse it, a killed driver), and Tune removes the placement group they ran in.

A rank that fails, or dies, ends the pool: the others are killed, so that none waits in a
collective for it, and the trial's next attempt starts a new pool from its checkpoint.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

import ray
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from tuner.errors import TunerError

__all__ = ["RankFailed", "RankPool", "RankWorker", "discard_pool", "run_on_pool", "warm_pool"]

logger = logging.getLogger(__name__)

_GROUP_TIMEOUT_S = 1800  # a collective's longest wait (Ray Train's default too)
_SETTLE_S = 30.0  # a stopped trial's other ranks unwind (loaders, gc) within this: less
# than the time Tune gives rank 0's thread to end before it reuses the process (trainable.py)
_WATCH_EVERY_S = 0.5


@ray.remote
class RankWorker:
    """Rank ``rank`` (> 0) of a pool: imports the trial's code once, joins the group once, and
    runs each trial's rank ``rank`` (:func:`tuner.tune.ddp_trial.run_rank`)."""

    def __init__(self, rank: int, world_size: int) -> None:
        # The trial's code (torch, timm, the engine) loads here, once for every trial after.
        from tuner.tune import ddp_trial

        self.rank, self.world_size, self.ddp_trial = rank, world_size, ddp_trial

    def pid(self) -> int:
        return os.getpid()

    def join(self, *, backend: str, address: str, port: int) -> None:
        join_group(
            backend=backend, address=address, port=port, rank=self.rank, size=self.world_size
        )

    def run(self, trial: dict[str, Any], checkpoint: Any) -> str:
        """This rank's part of one trial: "done", or "stopped" (rank 0 was stopped)."""
        return str(self.ddp_trial.run_rank(self.rank, self.world_size, trial, checkpoint))


@dataclasses.dataclass
class RankPool:
    """The warm ranks 1..N-1 of this process's trials, and the group they share with it."""

    world_size: int
    backend: str
    bundle: dict[str, float]  # each rank's resources
    placement_group_id: Any  # the trial's placement group, which a reused trainable keeps
    workers: list[Any]  # RankWorker handles, rank 1 first

    def pids(self) -> list[int]:
        return [int(p) for p in ray.get([w.pid.remote() for w in self.workers])]


_POOL: RankPool | None = None  # this process's pool (the trainable's: rank 0)


def warm_pool(
    world_size: int, *, backend: str, bundle: dict[str, float], tell: Callable[[str], None]
) -> tuple[RankPool, bool]:
    """This process's pool for ``world_size`` ranks: the one an earlier trial left (and
    ``True``), or a new one, its steps told to the console's line."""
    global _POOL
    group = ray.util.get_current_placement_group()
    group_id = group.id if group is not None else None
    wanted = (world_size, backend, bundle, group_id)
    if _POOL is not None and _is_up(_POOL):
        held = (_POOL.world_size, _POOL.backend, _POOL.bundle, _POOL.placement_group_id)
        if held == wanted:
            return _POOL, True
    discard_pool()
    tell(f"starting {world_size} workers")
    workers = [_start_worker(rank, world_size, bundle, group) for rank in range(1, world_size)]
    pool = RankPool(world_size, backend, bundle, group_id, workers)
    _POOL = pool  # a failure below discards it with the rest
    ray.get([w.pid.remote() for w in workers])  # up, the trial's code loaded
    tell(f"{world_size} workers started, joining their {backend} group")
    address, port = ray.util.get_node_ip_address(), _free_port()
    joins = [w.join.remote(backend=backend, address=address, port=port) for w in workers]
    join_group(backend=backend, address=address, port=port, rank=0, size=world_size)
    ray.get(joins)
    return pool, False


def _start_worker(rank: int, world_size: int, bundle: dict[str, float], group: Any) -> Any:
    # In the trial's own placement group (its bundle ``rank``): Tune reserved it for the trial.
    strategy = (
        PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=rank)
        if group is not None
        else "DEFAULT"
    )
    options = {"num_cpus": bundle.get("CPU", 0), "num_gpus": bundle.get("GPU", 0)}
    return RankWorker.options(**options, scheduling_strategy=strategy).remote(rank, world_size)


def _is_up(pool: RankPool) -> bool:
    import torch.distributed as dist

    return dist.is_initialized() and dist.get_world_size() == pool.world_size


def join_group(*, backend: str, address: str, port: int, rank: int, size: int) -> None:
    """Join the pool's torch process group (rank 0 hosts its store at ``address:port``)."""
    import torch.distributed as dist

    os.environ["LOCAL_RANK"] = "0"  # each rank sees its own bundle's GPUs only (World.local_cuda)
    dist.init_process_group(
        backend,
        init_method=f"tcp://{address}:{port}",
        rank=rank,
        world_size=size,
        timeout=datetime.timedelta(seconds=_GROUP_TIMEOUT_S),
    )


def discard_pool() -> None:
    """End this process's pool: its workers killed, its group left (a new one starts next)."""
    global _POOL
    pool, _POOL = _POOL, None
    if pool is not None:
        for worker in pool.workers:
            ray.kill(worker)
    import torch.distributed as dist

    if dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception as exc:  # a group a dead rank broke: nothing left to end
            logger.debug("leaving a broken process group: %s", exc)


def run_on_pool(
    pool: RankPool, trial: dict[str, Any], checkpoint: Any, rank0: Callable[[], None]
) -> None:
    """Run one trial: ranks 1..N-1 on the pool's workers, rank 0 (``rank0``) here.

    A worker that fails or dies ends the pool at once (the others would wait for it in a
    collective): rank 0's collective then fails, and the trial's attempt with it, raised as
    :class:`RankFailed` naming that rank. Rank 0 stopped (by Tune, in ``tune.report``) tells
    the others at that report; they unwind and the pool stays for the next trial.
    """
    runs = [worker.run.remote(trial, checkpoint) for worker in pool.workers]
    failed: list[str] = []
    watching = threading.Event()
    args = (pool, runs, failed, watching)
    watcher = threading.Thread(target=_watch, args=args, daemon=True)
    watcher.start()
    try:
        rank0()
    except BaseException as exc:
        _end_watch(watcher, watching, runs, failed)
        if failed and isinstance(exc, Exception) and not isinstance(exc, TunerError):
            raise RankFailed(f"{failed[0]} (rank 0: {exc})") from exc
        raise
    _end_watch(watcher, watching, runs, failed)
    if failed:
        raise RankFailed(failed[0])


class RankFailed(RuntimeError):
    """A rank of a data-parallel trial failed or died: Tune retries the trial from its latest
    checkpoint, on a new pool."""


def _end_watch(
    watcher: threading.Thread, watching: threading.Event, runs: list[Any], failed: list[str]
) -> None:
    """Stop watching; a worker whose run failed, died or did not end ends the pool."""
    watching.set()
    watcher.join()
    if not failed:
        failed.extend(_unsettled(runs))
    if failed:
        discard_pool()


def _watch(pool: RankPool, runs: list[Any], failed: list[str], done: threading.Event) -> None:
    """Until ``done``: a worker's run that raised (or whose process died) ends the others, so
    that rank 0's collective fails now, not after the group's timeout (rank 0's thread then
    leaves the group: not this one, while a collective may be using it)."""
    pending = list(runs)
    while pending and not done.is_set():
        ready, pending = ray.wait(pending, timeout=_WATCH_EVERY_S)
        for run in ready:
            try:
                ray.get(run)
            except Exception as exc:
                failed.append(_failure(runs.index(run) + 1, exc))
                for worker in pool.workers:
                    ray.kill(worker)
                return


def _unsettled(runs: list[Any]) -> list[str]:
    """What went wrong with the workers' runs: each one that failed, died or did not end
    within ``_SETTLE_S`` (a stopped trial's ranks unwind in that time)."""
    ready, pending = ray.wait(runs, num_returns=len(runs), timeout=_SETTLE_S)
    problems = [f"rank {runs.index(run) + 1} did not end in {_SETTLE_S:.0f} s" for run in pending]
    for run in ready:
        try:
            ray.get(run)
        except Exception as exc:
            problems.append(_failure(runs.index(run) + 1, exc))
    return problems


def _failure(rank: int, exc: Exception) -> str:
    died = isinstance(exc, ray.exceptions.RayActorError)
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return f"rank {rank} {'died' if died else 'failed'}: {type(exc).__name__}: {first}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])
