"""The Ray Tune objects :mod:`tuner.tune.run` hands to ``tune.Tuner``: the trainable, the tune
config and the run config (MLflow and W&B on request only: nothing leaves the machine by
default).
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any

import optuna
from ray import tune
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, TrialScheduler
from ray.tune.search import ConcurrencyLimiter

from tuner.experiment.paths import ExperimentPaths
from tuner.objectives import objective_directions, objective_metrics
from tuner.spaces import SpaceSampler
from tuner.tune import ddp_trial
from tuner.tune.context import SearchContext
from tuner.tune.progress import ProgressPrinter
from tuner.tune.retries import RetryRecord
from tuner.tune.samplers import make_sampler
from tuner.tune.scheduler import ParetoASHA
from tuner.tune.search_end import ResumableSearchGenerator, SearchTimeBudget
from tuner.tune.searcher import ConstrainedOptunaSearch
from tuner.tune.tracking import SearchEndCut, StepTBXLoggerCallback, trial_dirname
from tuner.tune.trainable import TrialContext, run_trial
from tuner.usercode import registered

__all__ = [
    "actor_namespace",
    "logger_callbacks",
    "quiet_ray",
    "run_config",
    "trainable",
    "tune_config",
]


def actor_namespace(paths: ExperimentPaths) -> str:
    return f"tuner-{paths.name}"


def trainable(search: SearchContext) -> Any:
    options, plan = search.options, search.plan
    context = TrialContext(
        max_memory_bytes=options.max_memory_bytes,
        probe_steps=options.probe_steps,
        threads=plan.torch_threads,
        cores=max(1, int(plan.cpus_per_trial)),
        device=plan.trial_device,
        search_only=search.search_only,
        speed_repeats=options.speed_repeats,
        actor_namespace=actor_namespace(search.paths),
        user_objects=registered(),
        checkpoint_every_s=options.checkpoint_every_s,
        feasibility_steps=options.feasibility_steps,
        probe_share=options.probe_share,
    )
    if plan.max_world_size > 1:
        return ddp_trial.trainable(context, plan)
    resources = {"cpu": plan.cpus_per_trial, "gpu": plan.gpus_per_trial}
    return tune.with_resources(tune.with_parameters(run_trial, context=context), resources)


def tune_config(
    search: SearchContext, design: list[dict[str, Any]], study_attrs: dict[str, Any]
) -> tune.TuneConfig:
    """The searcher, concurrency and scheduler. The searcher ends the search at the metadata's
    trial count, which a resume can raise, so Tune's own count is unlimited."""
    options, space, plan = search.options, search.space, search.plan
    searcher = ConstrainedOptunaSearch(
        study_attrs=study_attrs,
        experiment_dir=search.paths.local,
        space=SpaceSampler(space.ref, plan.cuda, plan.fixed or None),
        points_to_evaluate=design or None,
        metric=objective_metrics(options.objective),
        mode=objective_directions(options.objective),
        sampler=make_sampler(
            options.sampler,
            seed=options.seed,
            budget=plan.sample_budget,
            concurrency=plan.concurrency,
            grid=space.grid,
        ),
        study_name=search.paths.name,
        storage=optuna.storages.RDBStorage(search.paths.study_url),
    )
    limited = ConcurrencyLimiter(searcher, max_concurrent=plan.concurrency)
    return tune.TuneConfig(
        search_alg=ResumableSearchGenerator(limited),
        scheduler=_scheduler(search),
        num_samples=-1,
        # One worker process serves trial after trial: no process start and imports between
        # trials (a data-parallel trial's: its warm ranks too, tuner.tune.rank_pool).
        # Measurements stay per trial: CUDA peaks are reset and the cache freed per run, CPU
        # memory is counted, not sampled from the process (tuner.engine.meters).
        reuse_actors=True,
        trial_dirname_creator=trial_dirname,
    )


def run_config(search: SearchContext) -> Any:
    options, plan, paths = search.options, search.plan, search.paths
    return tune.RunConfig(
        name=paths.name,
        storage_path=paths.storage,
        stop=SearchTimeBudget(paths.local),
        failure_config=tune.FailureConfig(max_failures=options.max_failures),
        checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
        callbacks=[
            ProgressPrinter(
                total=plan.sample_budget,
                experiment_dir=paths.local,
                probe_share=options.probe_share if options.speed_repeats else None,
                probes_unbounded=bool(options.speed_repeats) and options.probe_share is None,
                actor_namespace=actor_namespace(paths),
                time_budget_s=options.search_time_budget_s,
            ),
            SearchEndCut(),  # a trial the time budget cut: incomplete, for the folder's reader
            RetryRecord(),  # a retried trial's failed attempts, which its retry reports
            *logger_callbacks(
                mlflow_uri=options.mlflow,
                wandb_project=options.wandb,
                experiment=paths.name,
                space=options.space,
                experiment_dir=paths.local,
            ),
        ],
        verbose=1 if options.verbose else 0,
    )


def logger_callbacks(
    *,
    mlflow_uri: str | None,
    wandb_project: str | None,
    experiment: str,
    space: str,
    experiment_dir: Path,
) -> list[tune.Callback]:
    """TensorBoard always, MLflow and W&B when asked for (only then imported: ~1 s each)."""
    callbacks: list[tune.Callback] = [StepTBXLoggerCallback()]
    tags = {"space": Path(space).stem, "experiment": experiment}
    if mlflow_uri:
        from tuner.tune.mlflow_logger import StepMLflowLoggerCallback

        callbacks.append(
            StepMLflowLoggerCallback(mlflow_uri, experiment_name=experiment, tags=tags)
        )
    if wandb_project:
        from tuner.tune.wandb_logger import WandbOfflineCallback

        callbacks.append(
            WandbOfflineCallback(project=wandb_project, folder=experiment_dir, tags=tags)
        )
    return callbacks


def _scheduler(search: SearchContext) -> TrialScheduler:
    options = search.options
    if not options.early_stopping:
        return FIFOScheduler()
    metrics = objective_metrics(options.objective)
    if options.multi_objective:
        return ParetoASHA(
            metrics=metrics,
            directions=objective_directions(options.objective),
            max_reports=_evaluations(search.plan.workload),
        )
    return ASHAScheduler(metric=metrics[0], mode="max", grace_period=1, reduction_factor=3)


def _evaluations(workload: dict[str, Any]) -> int | None:
    """How many evaluations a full trial makes, when its budget and cadence share a unit (the
    k-th report of every trial then comes at equal cost)."""
    if workload.get("epochs"):
        return None
    for budget, every in (
        ("images", "eval_every_images"),
        ("steps", "eval_every_steps"),
        ("time_budget_s", "eval_every_s"),
    ):
        if workload.get(budget) and workload.get(every):
            return math.ceil(workload[budget] / workload[every])
    return None


def quiet_ray(*, verbose: bool) -> None:
    """Our one line per trial replaces Ray's tables, warnings and tracebacks (error.txt keeps
    them)."""
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    # Ray's "Resume experiment with: Tuner.restore(...)" after Ctrl-C: the summary says how
    # to continue a search (tuner search --resume), which Ray's line would contradict.
    logging.getLogger("ray.tune.tune").addFilter(_no_restore_hint)
    if not verbose:
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
        os.environ.setdefault("TUNE_PRINT_ALL_TRIAL_ERRORS", "0")


def _no_restore_hint(record: logging.LogRecord) -> bool:
    return "Tuner.restore(" not in record.getMessage()
