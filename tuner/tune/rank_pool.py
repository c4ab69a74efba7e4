"""Warm ranks for data-parallel trials: ranks 1..N-1 (:class:`RankWorker` actors in the trial's
other bundles) and their torch process group, kept by the trial's own process (rank 0), which
Tune reuses for the next trial of the same resources (``reuse_actors``): a later trial starts
no process and joins no group (bench/data_parallel_overhead.py). The workers are rank 0's own
actors: they die with it, and Tune removes their placement group.

A rank that fails, dies or stalls (its heartbeat, :mod:`tuner.tune.rank_beat`, silent for
``STALL_S``) ends the pool: the others are killed, so that none waits in a collective for it,
and the trial's next attempt starts a new pool from its checkpoint. A pool is checked before a
trial reuses it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable
from typing import Any

import ray
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from tuner.errors import TunerError
from tuner.tune import rank_beat
from tuner.tune.rank_layout import (
    LAYOUT_VARIABLES,
    RankPlace,
    nccl_error_handling,
    rank_env,
    store_host,
)

__all__ = ["RankFailed", "RankPool", "RankWorker", "discard_pool", "run_on_pool", "warm_pool"]

logger = logging.getLogger(__name__)

_GROUP_TIMEOUT_S = 1800  # a collective's longest wait (Ray Train's default too)
_SETTLE_S = 30.0  # a stopped trial's other ranks unwind (loaders, gc) within this: less
# than the time Tune gives rank 0's thread to end before it reuses the process (trainable.py)
_WATCH_EVERY_S = 0.5
_HEALTH_S = 10.0  # a warm rank answers a ping within this before a trial reuses it
_SILENT_TELL_S = 5.0  # a rank silent this long is told on the console's running line


@ray.remote
class RankWorker:
    """Rank ``rank`` (> 0) of a pool: imports the trial's code and joins the group once, then
    runs each trial's ``run_rank`` (passed in, so that this module imports no trial module)."""

    def __init__(self, rank: int, world_size: int) -> None:
        # The trial's code (torch, timm, the engine) loads here, once for every trial after.
        import tuner.tune.trainable  # noqa: F401

        self.rank, self.world_size = rank, world_size

    def place(self) -> RankPlace:
        return _own_place()

    def pid(self) -> int:
        return os.getpid()

    def join(self, *, backend: str, host: str, port: int, env: dict[str, str]) -> None:
        os.environ.update(env)  # before the group, and before anything touches CUDA
        store = join_group(
            backend=backend, host=host, port=port, rank=self.rank, size=self.world_size
        )
        rank_beat.start_beating(store, self.rank)

    def environment(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if k in LAYOUT_VARIABLES}

    def run(self, trial: dict[str, Any], checkpoint: Any) -> str:
        return str(trial["run_rank"](self.rank, self.world_size, trial, checkpoint))


def _own_place() -> RankPlace:
    context = ray.get_runtime_context()
    gpus = context.get_accelerator_ids().get("GPU", [])
    return RankPlace(
        context.get_node_id(), ray.util.get_node_ip_address(), os.getpid(), tuple(map(str, gpus))
    )


@dataclasses.dataclass
class RankPool:
    """The warm ranks 1..N-1 of this process's trials, and the group they share with it."""

    world_size: int
    backend: str
    bundle: dict[str, float]  # each rank's resources
    placement_group_id: Any  # the trial's placement group, which a reused trainable keeps
    workers: list[Any]  # RankWorker handles, rank 1 first
    places: list[RankPlace] = dataclasses.field(default_factory=list)  # rank 0 first
    store: Any = None  # the group's TCP store, hosted here (rank 0)
    port: int = 0  # where the store listens (on :func:`tuner.tune.rank_layout.store_host`)

    def pids(self) -> list[int]:
        return [int(p) for p in ray.get([w.pid.remote() for w in self.workers])]

    def where(self, rank: int) -> str:
        place = self.places[rank] if rank < len(self.places) else None
        return f"node {place.node_ip}, pid {place.pid}" if place else "node unknown"

    def environments(self) -> list[dict[str, str]]:
        here = {k: v for k, v in os.environ.items() if k in LAYOUT_VARIABLES}
        return [here, *ray.get([w.environment.remote() for w in self.workers])]


_POOL: RankPool | None = None  # this process's pool (the trainable's: rank 0)


def warm_pool(
    world_size: int, *, backend: str, bundle: dict[str, float], tell: Callable[[str], None]
) -> tuple[RankPool, bool]:
    """This process's pool: the one an earlier trial left, checked (and ``True``), or a new one."""
    group = ray.util.get_current_placement_group()
    group_id = group.id if group is not None else None
    wanted = (world_size, backend, bundle, group_id)
    if _POOL is not None:
        held = (_POOL.world_size, _POOL.backend, _POOL.bundle, _POOL.placement_group_id)
        if held == wanted and _is_up(_POOL, tell):
            return _POOL, True
    discard_pool()
    tell(f"starting {world_size} workers")
    return _start_pool(world_size, backend, bundle, group, tell), False


def _start_pool(
    world_size: int, backend: str, bundle: dict[str, float], group: Any, tell: Callable[[str], None]
) -> RankPool:
    global _POOL
    workers = [_start_worker(rank, world_size, bundle, group) for rank in range(1, world_size)]
    pool = RankPool(world_size, backend, bundle, group.id if group is not None else None, workers)
    _POOL = pool  # a failure below discards it with the rest
    pool.places = [_own_place(), *ray.get([w.place.remote() for w in workers])]  # up, loaded
    tell(f"{world_size} workers started, joining their {backend} group")
    envs = rank_env(pool.places)
    host = store_host(pool.places)
    listener = socket.create_server((host, 0))  # bound where the ranks reach it, no wider
    port = pool.port = int(listener.getsockname()[1])
    joins = [
        w.join.remote(backend=backend, host=host, port=port, env=env)
        for w, env in zip(workers, envs[1:], strict=True)
    ]
    os.environ.update(envs[0])
    pool.store = join_group(
        backend=backend, host=host, port=port, rank=0, size=world_size, listener=listener
    )
    ray.get(joins)
    return pool


def _start_worker(rank: int, world_size: int, bundle: dict[str, float], group: Any) -> Any:
    # In the trial's own placement group (its bundle ``rank``): Tune reserved it for the trial.
    strategy = (
        PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=rank)
        if group is not None
        else "DEFAULT"
    )
    options = {"num_cpus": bundle.get("CPU", 0), "num_gpus": bundle.get("GPU", 0)}
    return RankWorker.options(**options, scheduling_strategy=strategy).remote(rank, world_size)


def _is_up(pool: RankPool, tell: Callable[[str], None]) -> bool:
    """Its group still joined and every worker answering within ``_HEALTH_S``: a rank that died
    between trials costs a new pool now, not the next trial's attempt."""
    import torch.distributed as dist

    if not (dist.is_initialized() and dist.get_world_size() == pool.world_size):
        return False
    pings = [worker.pid.remote() for worker in pool.workers]
    ready, _ = ray.wait(pings, num_returns=len(pings), timeout=_HEALTH_S)
    for rank, ping in enumerate(pings, start=1):
        try:
            if ping not in ready:
                raise TimeoutError(f"no answer in {_HEALTH_S:.0f} s")
            ray.get(ping)
        except Exception as exc:
            what = f"warm rank {rank} ({pool.where(rank)}) is gone: {type(exc).__name__}"
            logger.warning("%s; starting new workers", what)
            tell(f"{what}; starting new workers")
            return False
    return True


def join_group(
    *,
    backend: str,
    host: str,
    port: int,
    rank: int,
    size: int,
    listener: socket.socket | None = None,
) -> Any:
    """Join the pool's process group; rank 0 (``listener``: its bound socket) hosts its store."""
    import torch.distributed as dist

    if backend == "nccl":
        nccl_error_handling()
    timeout = datetime.timedelta(seconds=_GROUP_TIMEOUT_S)
    fd = {} if listener is None else {"master_listen_fd": listener.fileno()}
    try:
        store = dist.TCPStore(host, port, size, rank == 0, timeout=timeout, **fd)
    except BaseException:
        if listener is not None:
            listener.close()
        raise
    if listener is not None:
        listener.detach()  # the store owns the socket now, and closes it with its server
    dist.init_process_group(backend, store=store, rank=rank, world_size=size, timeout=timeout)
    return store


def discard_pool() -> None:
    global _POOL
    pool, _POOL = _POOL, None
    if pool is not None:
        _kill_workers(pool)
    _leave_group()
    if pool is not None:
        pool.store = None  # torch's store ends its server (and its socket) with its last reference


def run_on_pool(
    pool: RankPool,
    trial: dict[str, Any],
    checkpoint: Any,
    rank0: Callable[[], None],
    tell: Callable[[str], None] = lambda what: None,
) -> None:
    """Run one trial: ranks 1..N-1 on the pool's workers, rank 0 (``rank0``) here. A worker
    that fails, dies or stalls ends the pool at once, and the attempt with it
    (:class:`RankFailed`, naming the rank, its node and its step); a stopped trial keeps it."""
    runs = [worker.run.remote(trial, checkpoint) for worker in pool.workers]
    failed: list[str] = []
    watching = threading.Event()
    args = (pool, runs, failed, watching, tell)
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
    """A rank failed, died or stalled: Tune retries the trial from its checkpoint, on a new pool."""


def _end_watch(
    watcher: threading.Thread, watching: threading.Event, runs: list[Any], failed: list[str]
) -> None:
    watching.set()
    watcher.join()
    if not failed:
        failed.extend(_unsettled(runs))
    if failed:
        discard_pool()


def _watch(
    pool: RankPool,
    runs: list[Any],
    failed: list[str],
    done: threading.Event,
    tell: Callable[[str], None],
) -> None:
    """Until ``done``: a worker that raised, died or stopped beating ends the others, so that
    rank 0's collective fails now, not after the group's timeout (on nccl by an abort here)."""
    pending = list(runs)
    beats = rank_beat.Beats(pool.store, list(range(1, pool.world_size)))
    told = False
    while pending and not done.is_set():
        ready, pending = ray.wait(pending, timeout=_WATCH_EVERY_S)
        for run in ready:
            try:
                ray.get(run)
            except Exception as exc:
                failed.append(_failure(runs.index(run) + 1, exc, pool, beats))
                _end_ranks(pool)
                return
        problem = _beat_problem(pool, beats)
        if problem is not None:
            failed.append(problem)
            logger.warning("%s: ending the trial's ranks", problem)
            _end_ranks(pool)
            return
        rank, silent_s = beats.quietest()
        if silent_s >= _SILENT_TELL_S:
            tell(f"waiting on rank {rank} ({pool.where(rank)}): silent for {silent_s:.0f} s")
            told = True
        elif told:
            tell("")
            told = False


def _beat_problem(pool: RankPool, beats: rank_beat.Beats) -> str | None:
    try:
        beats.read()
    except Exception as exc:  # the store is this process's own: only a closing pool fails it
        logger.debug("no beats to read: %s", exc)
        return None
    stalled = beats.stalled()
    if not stalled:
        return None
    rank = stalled[0]
    return (
        f"rank {rank} stalled ({pool.where(rank)}) at step {beats.step(rank)}: "
        f"no heartbeat for {beats.silent_s(rank):.0f} s"
    )


def _end_ranks(pool: RankPool) -> None:
    _kill_workers(pool)
    if pool.backend == "nccl":
        _leave_group()


def _kill_workers(pool: RankPool) -> None:
    """Kill every worker; one on this node gets SIGKILL too: a stopped process does not answer
    Ray's kill."""
    here = pool.places[0].node_id if pool.places else None
    for rank, worker in enumerate(pool.workers, start=1):
        ray.kill(worker)
        place = pool.places[rank] if rank < len(pool.places) else None
        if place is not None and place.node_id == here:
            _kill_rank_process(place.pid)


def _kill_rank_process(pid: int) -> None:
    """SIGKILL ``pid`` while it is still a rank worker (not reused by another process)."""
    import psutil

    with contextlib.suppress(psutil.Error):
        process = psutil.Process(pid)
        if "RankWorker" in " ".join(process.cmdline()):
            process.send_signal(signal.SIGKILL)


def _leave_group() -> None:
    """Destroy this process's group (on nccl, which unlike gloo does not fail rank 0's
    collective when a peer dies, this aborts its communicators)."""
    import torch.distributed as dist

    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception as exc:  # a group a dead rank broke: nothing left to end
        logger.debug("leaving a broken process group: %s", exc)


def _unsettled(runs: list[Any]) -> list[str]:
    """Each worker's run that failed, died or did not end within ``_SETTLE_S``."""
    ready, pending = ray.wait(runs, num_returns=len(runs), timeout=_SETTLE_S)
    problems = [f"rank {runs.index(run) + 1} did not end in {_SETTLE_S:.0f} s" for run in pending]
    for run in ready:
        try:
            ray.get(run)
        except Exception as exc:
            problems.append(_failure(runs.index(run) + 1, exc))
    return problems


def _failure(
    rank: int, exc: Exception, pool: RankPool | None = None, beats: rank_beat.Beats | None = None
) -> str:
    died = isinstance(exc, ray.exceptions.RayActorError)
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    where = f" ({pool.where(rank)})" if pool is not None else ""
    step = f" at step {beats.step(rank)}" if beats is not None and beats.seen else ""
    return f"rank {rank} {'died' if died else 'failed'}{where}{step}: {type(exc).__name__}: {first}"
