"""Data-parallel trials: one Tune trial trains on N workers (``tuner search --world-size``).

Ray Train V2 cannot be a Tune trainable itself; Ray's documented way, followed here, is a Tune
function trainable (the trial's driver) that fits a ``TorchTrainer``. Ray Train starts N workers
in one placement group (PACK, or SPREAD with ``--spread-workers``), initializes a torch process
group (nccl on GPUs, gloo on CPUs) and runs the one-worker trial
(:class:`tuner.tune.trainable._TrialRun`) in each, its Ray I/O swapped; the engine sees the
group and trains data-parallel. Data stays the engine's: no ``prepare_data_loader``, whose
device copies would bypass the engine's prefetcher. Every rank calls ``ray.train.report`` (Ray
Train waits for all), rank 0 alone attaches the checkpoint, and ``TuneReportCallback`` forwards
rank 0's report to Tune. Rank 0 alone reads and writes the probe cache and broadcasts what it
read, so every rank runs the same speed probes.

A killed worker makes Ray Train restart the group from its latest checkpoint; a killed driver
makes Tune restart the trial, whose new ``TorchTrainer`` of the same name and storage (the
trial's folder) resumes from that checkpoint too. A deterministic error (bad input, or a run
the engine ended with an error) is reported as final with its checkpoint and raised, so Ray
Train ends the group at once (a rank that failed alone cannot leave the others waiting in a
collective). Ray Train restarts the group, whose workers read the error from the checkpoint and
return (every rank reads the same one: they end together); the driver then raises it, and
Tune's retries raise it from the checkpoint before any group starts. Two group starts in all,
not one per Ray Train retry inside each of Tune's (up to nine at ``--max-failures 2``).

A group's start is the trial's fixed cost (bench/data_parallel_overhead.py): Ray Train's
controller, the placement group, N worker processes (and Ray Train's synchronization actor)
that import torch, join their process group and load the trial's code, before rank 0 runs.
The controller gets only torch-free objects (:mod:`tuner.tune.ddp_controller`): no torch, timm
or engine import in series before the workers are asked for, and no Ray Data actors. Every
trial starts its own group: Ray Train V2 cannot hand a running group to a new trainer.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow.fs
import ray
import ray.cloudpickle
import ray.train
import torch.distributed as dist
from ray import tune
from ray.train.torch import TorchTrainer
from ray.tune.integration.ray_train import TuneReportCallback
from ray.util.placement_group import PlacementGroup

from tuner.spaces import WORLD_SIZE_PARAM
from tuner.speed.cache import Lookup, Remembered
from tuner.tune import _ray_internals as ray_internals
from tuner.tune._ray_internals import (
    ENABLE_PREEMPTION_WATCHER_ENV_VAR,
    HEALTH_CHECK_INTERVAL_S_ENV_VAR,
    DatasetsCallback,
    PlacementGroupCleanerCallback,
)
from tuner.tune.ddp_controller import GroupBackendConfig, TracebacksToTrialLog
from tuner.tune.plan import SearchPlan
from tuner.tune.probe_actor import tell
from tuner.tune.trainable import (
    EndedBefore,
    TrialContext,
    _run,
    _TrialRun,
    raise_if_ended,
)

__all__ = ["PlacementGroupReaper", "leaked_placement_groups", "run_worker_group", "trainable"]

_TRAIN_DIR = "train"
_TRIAL_KEY = "trial"  # the workers' loop config: the trial's, pickled (see _trainer)
RAY_TRAIN_LOG = "ray_train.log"  # in the trial's folder: Ray Train's warnings, tracebacks whole
_POLL_EVERY_S = 0.1  # Ray Train's controller polls its workers (and takes their reports)
# The driver's only reservation: Ray places no bundle without a resource, and a CPU share would
# leave a node of N cores one short of N one-core workers.
_DRIVER_MEMORY_BYTES = 64 * 2**20  # Ray Train's run folder inside the trial's folder
_REAP_EVERY_S = 2.0
_HANDOVER_S, _HANDOVER_MAX_S = 0.5, 30.0  # see _hand_over_the_last_report


def trainable(context: TrialContext, plan: SearchPlan, *, max_failures: int) -> Any:
    """The search's trainable when trials span workers; the driver itself asks for no CPU (it
    waits on its workers), so the plan's concurrency counts worker groups only."""
    resources = {"CPU": plan.cpus_per_trial, "GPU": plan.gpus_per_trial}
    scaling = ray.train.ScalingConfig(
        num_workers=plan.world_size,  # unless the space's ``world_size`` parameter says
        use_gpu=plan.gpus_per_trial > 0,
        resources_per_worker={k: v for k, v in resources.items() if v > 0},
        placement_strategy="SPREAD" if plan.spread_workers else "PACK",
    )
    driver = tune.with_parameters(
        run_worker_group, context=context, scaling=scaling, max_failures=max_failures
    )
    return tune.with_resources(driver, {"cpu": 0, "memory": _DRIVER_MEMORY_BYTES})


def run_worker_group(
    config: dict[str, Any],
    *,
    context: TrialContext,
    scaling: ray.train.ScalingConfig,
    max_failures: int,
) -> None:
    """Ray Tune function trainable (the trial's driver): fit a TorchTrainer of its workers."""
    storage = tune.get_context().get_storage()
    # A worker's ray.train.report waits in a one-slot queue until the controller polls, every
    # 2 s by default: a trial reporting more often trained only between polls (bench/
    # data_parallel_overhead.py). Propagated by Ray Train to the controller; a user's value wins.
    os.environ.setdefault(HEALTH_CHECK_INTERVAL_S_ENV_VAR, str(_POLL_EVERY_S))
    one_machine = len([node for node in ray.nodes() if node["Alive"]]) == 1
    if one_machine:
        # Ray Train's preemption watcher (an actor per group) tells a preempted node from a
        # crash, which one machine never needs; its start printed a core_worker error line
        # (ray-project/ray#53727) to the console for every trial. A user's value wins.
        os.environ.setdefault(ENABLE_PREEMPTION_WATCHER_ENV_VAR, "0")
    forward = TuneReportCallback()
    local = isinstance(storage.storage_filesystem, pyarrow.fs.LocalFileSystem)
    place = _TrialPlace(
        trial_id=tune.get_context().get_trial_id() or "",
        trial_folder=tune.get_context().get_trial_dir(),
        storage_path=storage.trial_fs_path,
        filesystem=storage.storage_filesystem,
        # On the controller's node, which is the driver's: local storage is the trial's folder.
        log=Path(storage.trial_fs_path if local else tune.get_context().get_trial_dir())
        / RAY_TRAIN_LOG,
        one_machine=one_machine,
    )
    trainer = _trainer(
        config, place, context=context, scaling=scaling, max_failures=max_failures, forward=forward
    )
    _raise_if_ended(_earlier_run(storage))
    # Until rank 0 runs: Ray Train's controller, a placement group, N worker processes that
    # import torch, and the process group (gloo or nccl): tens of seconds on a busy machine.
    workers = trainer.scaling_config.num_workers
    tell(context.cache_namespace, place.trial_id, f"starting {workers} workers")
    result = trainer.fit()
    _hand_over_the_last_report(forward)
    _raise_if_ended(result)


@dataclasses.dataclass(frozen=True)
class _TrialPlace:
    """Where a trial's worker group runs and writes, from the trial's Tune context."""

    trial_id: str  # Ray Train workers have no Tune context: rank 0 tells the console with it
    trial_folder: str | None  # the trial's own files (phases.jsonl), written by rank 0
    storage_path: str  # Ray Train's run folder goes in it
    filesystem: Any  # pyarrow's, of that path
    log: Path  # Ray Train's warnings and tracebacks, whole (TracebacksToTrialLog)
    one_machine: bool  # the cluster is one node


def _trainer(
    config: dict[str, Any],
    place: _TrialPlace,
    *,
    context: TrialContext,
    scaling: ray.train.ScalingConfig,
    max_failures: int,
    forward: ray.train.UserCallback,  # TuneReportCallback: rank 0's reports to Tune
) -> _TorchTrainer:
    """The trial's TorchTrainer: its workers run :func:`_worker` on the trial's config."""
    workers = int(config.get(WORLD_SIZE_PARAM, scaling.num_workers))
    trainer = _TorchTrainer(
        _worker,
        # Pickled here: Ray Train's controller unpickles the loop config too (its run context
        # holds it), and the trial's context would load torch and the engine there.
        train_loop_config={
            _TRIAL_KEY: ray.cloudpickle.dumps(
                {
                    "config": config,
                    "context": context,
                    "trial_folder": place.trial_folder,
                    "for_trial": place.trial_id,
                    "group_asked_unix_s": time.time(),  # the group's start, timed by rank 0
                }
            )
        },
        scaling_config=dataclasses.replace(scaling, num_workers=workers),
        torch_config=GroupBackendConfig(
            backend="nccl" if scaling.use_gpu else "gloo",
            cache_namespace=context.cache_namespace,
            trial_id=place.trial_id,
        ),
        run_config=ray.train.RunConfig(
            name=_TRAIN_DIR,
            storage_path=place.storage_path,
            storage_filesystem=place.filesystem,
            failure_config=ray.train.FailureConfig(max_failures=max_failures),
            checkpoint_config=ray.train.CheckpointConfig(num_to_keep=1),
            callbacks=[forward],
            logging_config=ray.train.LoggingConfig(log_level="WARNING"),  # not a line a report
        ),
    )
    trainer.trial_log, trainer.one_machine = place.log, place.one_machine
    return trainer


def _raise_if_ended(result: ray.train.Result | None) -> None:
    """The error the trial's latest checkpoint ends with, raised (Tune then ends the trial
    ERROR; each of its retries raises it here, before any worker starts)."""
    raise_if_ended(result.checkpoint if result is not None else None)


def _earlier_run(storage: Any) -> ray.train.Result | None:
    """What an earlier run of this trial's worker group left (a retry, or a resume), if any."""
    folder = f"{storage.trial_fs_path.rstrip('/')}/{_TRAIN_DIR}"
    try:
        return ray.train.Result.from_path(folder, storage.storage_filesystem)
    except (RuntimeError, OSError, ValueError):  # no such run yet, or no report of it saved
        return None


def _hand_over_the_last_report(forward: TuneReportCallback) -> None:
    """Return only once Tune has taken the worker group's last report.

    Tune's function trainable reads Ray Train's queue (where ``TuneReportCallback`` puts each
    report) and then its own result queue, in turn; the end marker it queues when this function
    returns can overtake a final report still in Ray Train's queue. The report is then lost and
    a trial that trained to its end reads "stopped early": Ray Train's checkpoint snapshot held
    the final report, Tune's result.json did not (the long tier, once). The queue is the
    callback's own attribute: Ray has no public handle on it.
    """
    items = forward._training_actor_item_queue
    deadline = time.monotonic() + _HANDOVER_MAX_S
    while not items.empty() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(_HANDOVER_S)  # Tune's thread moves the report to its result queue meanwhile


class _TorchTrainer(TorchTrainer):
    """Ray's TorchTrainer without its placement-group cleaner: a detached actor per trial that
    asks the State API whether the controller lives; without the dashboard package (a plain
    ``ray[tune]`` install) it warns every second and never ends, outliving the job. Its one
    job, removing the group of a controller that died, is :class:`PlacementGroupReaper`'s (and
    Ray ends a dead driver's groups with its job). Without datasets, no datasets callback
    either (its ``DatasetManager`` actor, a process per group); on one machine, no autoscaler
    requests (tuner.tune.ddp_controller says what each cost the group's start)."""

    trial_log: Path | None = None  # where Ray Train's tracebacks go (TracebacksToTrialLog)
    one_machine = False  # the cluster is one node: no autoscaler to ask for resources

    def _create_default_callbacks(self) -> list[Any]:
        unneeded = (PlacementGroupCleanerCallback, *(() if self.datasets else (DatasetsCallback,)))
        kept = [c for c in super()._create_default_callbacks() if not isinstance(c, unneeded)]
        return [*kept, TracebacksToTrialLog(self.trial_log)] if self.trial_log else kept

    def _initialize_and_run_controller(self, **controller_init_kwargs: Any) -> Any:
        if self.one_machine:
            policy = controller_init_kwargs["scaling_policy"]
            controller_init_kwargs["scaling_policy"] = ray_internals.no_autoscaler_requests(policy)
        return super()._initialize_and_run_controller(**controller_init_kwargs)


def _worker(loop_config: dict[str, Any]) -> None:
    """One Ray Train worker: the one-worker trial, reporting through Ray Train."""
    loop_config = ray.cloudpickle.loads(loop_config[_TRIAL_KEY])
    run = _WorkerRun(loop_config["context"], trial_dir=loop_config.get("trial_folder"))
    run.trial_id = loop_config.get("for_trial", "")
    run.group_asked_unix_s = loop_config.get("group_asked_unix_s")
    try:
        _run(run, loop_config["config"])
    except EndedBefore:  # every rank read it from the same checkpoint: the driver raises it
        return


class _WorkerRun(_TrialRun):
    """A trial's run on one rank of its worker group."""

    def __init__(self, context: TrialContext, *, trial_dir: str | None = None) -> None:
        # Ray Train logs every report of every rank at INFO (the whole metrics dict), from a
        # logger named after its file's path (getLogger(__file__)): outside "ray.train", so
        # neither that logger's level nor LoggingConfig reaches it. Its own object does.
        ray_internals.quiet_train_context_logger()
        train_context = ray.train.get_context()
        self.rank = train_context.get_world_rank()
        self.world_size = train_context.get_world_size()
        self.trial_dir = trial_dir
        super().__init__(context)

    group_asked_unix_s: float | None = None  # when the trial's driver asked for the group

    def _begun(self) -> None:
        """Rank 0: how long the group took to start, into the phase log and the console."""
        # A group Ray Train restarted (a worker died) reuses the first start's ask: not its own.
        if self.rank != 0 or self.group_asked_unix_s is None or self.restored:
            return
        took = time.time() - self.group_asked_unix_s
        self.phases.write("group_start", workers=self.world_size, seconds=round(took, 3))
        self._tell(f"{self.world_size} workers up after {took:.0f} s")

    def _trial_dir(self) -> str | None:
        return self.trial_dir if self.rank == 0 else None  # one copy: every rank fails alike

    def _checkpoint_due(self) -> bool:
        return self.rank == 0 and super()._checkpoint_due()  # the others' would go unused

    def _emit(self, report: dict[str, Any], checkpoint: Path | None) -> None:
        attach = checkpoint is not None and self.rank == 0
        saved = ray.train.Checkpoint.from_directory(checkpoint) if attach else None
        ray.train.report(report, checkpoint=saved)

    def _latest_checkpoint(self) -> Any:
        return ray.train.get_checkpoint()

    # The probe cache is keyed per world size; only rank 0 talks to it.
    def _cached(self, lookup: Lookup) -> Remembered | None:
        found = [super()._cached(self._keyed(lookup)) if self.rank == 0 else None]
        dist.broadcast_object_list(found, src=0)  # every rank runs the same probes, or none
        return found[0]

    def _store(self, lookup: Lookup, choice: dict[str, Any]) -> None:
        if self.rank == 0:
            super()._store(self._keyed(lookup), choice)

    # Every rank must run the same probe runs, but a budget decides from each rank's own clock:
    # a worker group's probes are unbounded and unclaimed (tuner.speed.budget; README).
    def _draw(self, earned_s: float) -> float | None:
        return None

    def _settle(self, returned_s: float, spent_s: float, earned_late_s: float) -> None:
        return None

    def _earn(self, trial_s: float) -> None:
        return None

    def _claim(self, key: str, for_s: float) -> bool:
        return True

    def _prior_run_s(self, config: dict[str, Any], steps: int) -> float | None:
        return None

    def _observe(self, cost: dict[str, Any]) -> None:
        return None  # a group's step time is the whole group's: no prior of a one-process run

    def _tell(self, what: str) -> None:
        if self.rank == 0:
            super()._tell(what)

    def _keyed(self, lookup: Lookup) -> Lookup:
        key = json.dumps({**json.loads(lookup.key), "workers": self.world_size}, sort_keys=True)
        return dataclasses.replace(lookup, key=key)


# ---- placement groups that outlive their trial ----------------------------------------------


class PlacementGroupReaper(tune.Callback):
    """Removes the worker placement groups whose Ray Train controller died with its trial.

    A trial Tune stops (early stopping, the time budget) kills its driver, and with it Ray
    Train's controller, before the controller removes its workers' placement group; Ray's own
    cleaner needs the State API (the dashboard package), absent from a plain ``ray[tune]``
    install, and the next trial's workers would wait for resources that never free. Checked when
    a trial ends and, at most every 2 s, while Tune runs (a stopped trial's actors die shortly
    after Tune reports it complete).
    """

    def __init__(self) -> None:
        self._last = 0.0

    def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
        if time.monotonic() - self._last >= _REAP_EVERY_S:
            self._reap()

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._reap()

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._reap()

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        """The last trial's driver may die just after Tune ends: wait for it (up to 10 s)."""
        deadline = time.monotonic() + 10
        while _live_controllers() and time.monotonic() < deadline:
            time.sleep(0.5)
        self._reap()

    def _reap(self) -> None:
        self._last = time.monotonic()
        for group in leaked_placement_groups():
            ray.util.remove_placement_group(group)


def leaked_placement_groups() -> list[Any]:
    """This job's placement groups whose creating actor is dead and which still hold resources.

    Tune's own trial groups are created by the driver (no creating actor) and are left alone, as
    are detached groups and other jobs' groups. The creator is only in GCS's raw table (the
    public ``placement_group_table`` omits it); Ray's own cleaner asks the State API instead.
    """
    job = ray.get_runtime_context().get_job_id()
    removed = ray_internals.PLACEMENT_GROUP_REMOVED
    leaked = []
    for info in ray_internals.placement_group_rows():
        if (
            info.creator_actor_id
            and not ray.ActorID(info.creator_actor_id).is_nil()
            and info.creator_actor_dead
            and not info.is_detached
            and info.state != removed
            and info.creator_job_id.hex() == job
        ):
            leaked.append(PlacementGroup(ray.PlacementGroupID(info.placement_group_id)))
    return leaked


def _live_controllers() -> int:
    """How many of this job's Ray Train controllers are alive (from GCS, no State API)."""
    job = ray.get_runtime_context().get_job_id()
    return sum(
        1
        for a in ray_internals.job_actors().values()
        if a["JobID"] == job and a["ActorClassName"] == "TrainController" and a["State"] == "ALIVE"
    )
