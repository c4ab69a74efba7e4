"""Data-parallel trials: one Tune trial trains on N ranks (``tuner search --world-size``).

A trial asks Tune for N bundles (PACK, or SPREAD with ``--spread-workers``). Its own process is
rank 0 and reports, checkpoints and restores as a one-process trial does; ranks 1..N-1 run the
same trial on warm workers (:mod:`tuner.tune.rank_pool`), which Tune's reuse of rank 0's
process keeps for the next trial (Ray Train cannot hand a running group to a new trainer).
Rank 0 alone reads the probe cache and broadcasts what it read, so every rank runs the same
probes. At each report rank 0 broadcasts whether Tune stopped the trial, so every rank ends at
the same report. A deterministic error is reported as final and raised on every rank.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import torch.distributed as dist
from ray import tune

from tuner import record
from tuner.engine.distributed import World
from tuner.spaces import WORLD_SIZE_PARAM
from tuner.speed.cache import Lookup, Remembered
from tuner.tune import rank_beat
from tuner.tune._ray_internals import is_tune_stop
from tuner.tune.plan import SearchPlan
from tuner.tune.rank_pool import run_on_pool, warm_pool
from tuner.tune.trainable import (
    EndedBefore,
    TrialContext,
    _run,
    _trial_id,
    _TrialRun,
    allow_slow_trial_exit,
    raise_if_ended,
)
from tuner.tune.trials_actor import ActorStore, NullStore, TrialStore

__all__ = ["RankStopped", "run_rank", "run_ranked_trial", "trainable"]


def trainable(context: TrialContext, plan: SearchPlan) -> Any:
    """The search's trainable when trials span ranks: N bundles of one rank's resources each."""
    resources = {"CPU": plan.cpus_per_trial, "GPU": plan.gpus_per_trial}
    bundle = {k: v for k, v in resources.items() if v > 0}
    driver = tune.with_parameters(
        run_ranked_trial, context=context, backend="nccl" if plan.gpus_per_trial > 0 else "gloo"
    )
    strategy = "SPREAD" if plan.spread_workers else "PACK"
    return tune.with_resources(driver, _Bundles(bundle, plan.world_size, strategy))


@dataclasses.dataclass(frozen=True)
class _Bundles:
    """One bundle per rank (N: the trial's ``world_size`` parameter, else the plan's)."""

    bundle: dict[str, float]
    world_size: int  # unless the trial's ``world_size`` parameter says
    strategy: str

    def __call__(self, config: dict[str, Any]) -> tune.PlacementGroupFactory:
        ranks = int(config.get(WORLD_SIZE_PARAM, self.world_size))
        return tune.PlacementGroupFactory([dict(self.bundle)] * ranks, strategy=self.strategy)


def run_ranked_trial(config: dict[str, Any], *, context: TrialContext, backend: str) -> None:
    allow_slow_trial_exit()  # a stopped trial's ranks unwind before Tune reuses the process
    asked = time.time()
    resources = tune.get_context().get_trial_resources()
    world_size = len(resources.bundles)
    checkpoint = tune.get_checkpoint()
    raise_if_ended(checkpoint)  # a retry after a deterministic error starts no worker
    run = RankRun(context, rank=0, world_size=world_size)
    run.group_asked_unix_s = asked
    if world_size == 1:
        _run(run, config)
        return
    pool, run.warm = warm_pool(
        world_size, backend=backend, bundle=resources.bundles[-1], tell=run.store.tell
    )
    run.rank_envs = pool.environments()  # into the phase log: what each rank saw
    trial = {"config": config, "context": context, "run_rank": run_rank}
    run_on_pool(pool, trial, checkpoint, lambda: _run(run, config), tell=run.store.tell)


def run_rank(rank: int, world_size: int, trial: dict[str, Any], checkpoint: Any) -> str:
    run = RankRun(trial["context"], rank=rank, world_size=world_size, checkpoint=checkpoint)
    try:
        _run(run, trial["config"])
    except EndedBefore:  # every rank read it from the same checkpoint: rank 0 raises it
        return "ended"
    except RankStopped:
        return "stopped"
    return "done"


class RankStopped(BaseException):
    """Tune stopped rank 0's trial at this report. A BaseException, as Tune's own stop is: the
    engine must not take it for a failed run."""


class RankRun(_TrialRun):
    def __init__(
        self, context: TrialContext, *, rank: int, world_size: int, checkpoint: Any = None
    ) -> None:
        self.rank, self.world_size, self.checkpoint = rank, world_size, checkpoint
        store = ActorStore(context.actor_namespace, _trial_id()) if rank == 0 else NullStore()
        super().__init__(context, _GroupStore(store, world_size))

    group_asked_unix_s: float | None = None  # when the trial asked for its ranks
    warm = False  # the ranks were an earlier trial's
    rank_envs: list[dict[str, str]] | None = None  # each rank's layout variables (rank_layout)

    def _begun(self) -> None:
        if self.rank != 0 or self.group_asked_unix_s is None or self.world_size == 1:
            return
        took = time.time() - self.group_asked_unix_s
        seconds = round(took, 3)
        self.phases.write(
            "group_start",
            workers=self.world_size,
            seconds=seconds,
            warm=self.warm,
            ranks=self.rank_envs or [],
        )
        self.store.tell(f"{self.world_size} workers up after {took:.0f} s")

    def _trial_dir(self) -> str | None:
        return super()._trial_dir() if self.rank == 0 else None  # one copy: every rank fails alike

    def report_error(self, exc: Exception, *, final: bool) -> None:
        """A deterministic error is reported on every rank. Any other is not: a dead rank leaves
        the group unable to take the report, and Tune's error.txt names it."""
        if final or self.world_size == 1:
            super().report_error(exc, final=final)

    def _checkpoint_due(self) -> bool:
        return self.rank == 0 and super()._checkpoint_due()  # the others' would go unused

    def _emit(self, report: dict[str, Any], checkpoint: Any) -> None:
        rank_beat.note_step(int(report.get(record.STEP) or 0))  # the next heartbeat's step
        if self.rank > 0:
            if self._decide(stop=False):
                raise RankStopped
            return
        try:
            super()._emit(report, checkpoint)
        except BaseException as exc:
            if is_tune_stop(exc):  # Tune stopped the trial: the others end at this report too
                self._decide(stop=True)
            raise
        self._decide(stop=False)

    def _decide(self, *, stop: bool) -> bool:
        return World(self.rank, self.world_size).decide(stop)

    def _latest_checkpoint(self) -> Any:
        return super()._latest_checkpoint() if self.rank == 0 else self.checkpoint


@dataclasses.dataclass(frozen=True)
class _GroupStore(NullStore):
    """The probe cache as a rank sees it: keyed per world size, read by rank 0 alone (``cache``),
    which broadcasts what it read. The rest is :class:`NullStore`'s: a budget would decide from
    each rank's own clock, and every rank must run the same probe runs (README)."""

    cache: TrialStore
    world_size: int

    def get(self, lookup: Lookup) -> Remembered | None:
        found = [self.cache.get(self._keyed(lookup))]
        if self.world_size > 1:
            dist.broadcast_object_list(found, src=0)
        return found[0]

    def put(self, lookup: Lookup, choice: dict[str, Any]) -> None:
        self.cache.put(self._keyed(lookup), choice)

    def tell(self, what: str) -> None:
        self.cache.tell(what)

    def cache_key(self, key: str) -> str:
        return json.dumps({**json.loads(key), "workers": self.world_size}, sort_keys=True)

    def _keyed(self, lookup: Lookup) -> Lookup:
        return dataclasses.replace(lookup, key=self.cache_key(lookup.key))
