"""``run_search``: a Ray Tune ``Tuner`` over the trainable, driven by Optuna, then re-measured.

Flow: connect to Ray -> plan resources and workload -> check the space -> Tuner (new or
restored) with ``ConstrainedOptunaSearch`` (SQLite study in the experiment folder) ->
reconcile the study with Ray's trials -> re-measure the top candidates -> metadata -> report.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import optuna
import ray
from ray import tune
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, TrialScheduler
from ray.tune.search import ConcurrencyLimiter

from tuner.errors import TunerError
from tuner.search import cluster
from tuner.search.experiment import (
    EXPERIMENT_FILE,
    REMEASURE_FILE,
    ExperimentPaths,
    environment,
    load_metadata,
    now,
    options_from_metadata,
    update_metadata,
    write_metadata,
)
from tuner.search.metrics import objective_directions, objective_metrics
from tuner.search.options import SearchOptions
from tuner.search.plan import SearchPlan, check_space, make_plan
from tuner.search.progress import ProgressPrinter
from tuner.search.remeasure import (
    TrialRecord,
    pick_candidates,
    remeasure,
    write_remeasure_csv,
)
from tuner.search.samplers import make_sampler
from tuner.search.searcher import RAY_TRIAL_ID_ATTR, ConstrainedOptunaSearch
from tuner.search.summary import print_summary
from tuner.search.trainable import TrialContext, run_trial
from tuner.spaces import SearchSpace, SpaceSampler, get_space

__all__ = ["SearchOutcome", "run_search"]

REMEASURE_STEPS = 20


@dataclasses.dataclass(frozen=True)
class SearchOutcome:
    """Where a search's results are, and what happened."""

    experiment_dir: Path
    state: str  # finished | interrupted
    records: list[TrialRecord]
    report_dir: Path | None


def run_search(options: SearchOptions) -> SearchOutcome:
    """Run a search (or continue one with ``resume=True``) and return where its results are.

    Raises:
        TunerError: a bad space, option, workload override or cluster address.
    """
    name = options.name or f"{Path(options.space).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    paths = ExperimentPaths.of(options.storage, name)
    if options.resume:
        options = options_from_metadata(
            load_metadata(paths),
            resume=True,
            address=options.address,
            report=options.report,
            verbose=options.verbose,
        )
    elif (paths.local / EXPERIMENT_FILE).exists():
        raise TunerError(
            f"Experiment {name!r} already exists in {paths.local.parent}; continue it with "
            "--resume or pick another --name."
        )
    space = get_space(options.space)
    options = dataclasses.replace(options, name=name, space=space.ref)
    _quiet_ray(verbose=options.verbose)
    info = cluster.connect(address=options.address)
    try:
        plan = make_plan(options, space, node_cpus=_node_cpus(), total_gpus=info.total_gpus)
        return _search(options, space, plan, paths, info)
    finally:
        if info.is_local:
            cluster.shutdown()


def _search(
    options: SearchOptions,
    space: SearchSpace,
    plan: SearchPlan,
    paths: ExperimentPaths,
    info: cluster.ClusterInfo,
) -> SearchOutcome:
    if not options.resume:
        check_space(space, plan)
        write_metadata(paths, _metadata(options, space, plan, paths, info))
    _print_start(options, plan, paths)
    update_metadata(paths, state="running", resumed_at=now() if options.resume else None)
    try:
        trials, interrupted = _fit(options, space, plan, paths)
    except KeyboardInterrupt:
        update_metadata(paths, state="interrupted", ended_at=now())
        paths.upload()
        raise
    records = [_record(trial) for trial in trials]
    finished = not interrupted and all(t.status in ("TERMINATED", "ERROR") for t in trials)
    state = "finished" if finished else "interrupted"
    if finished:
        _reconcile_study(paths, records)
        _remeasure(options, plan, paths, records)
    update_metadata(paths, state=state, ended_at=now(), num_trials=len(records))
    paths.upload()
    report_dir = _report(options, paths) if finished and options.report else None
    print_summary(paths=paths, records=records, objective=options.objective, state=state,
                  report_dir=report_dir)  # fmt: skip
    return SearchOutcome(paths.local, state, records, report_dir)


def _fit(
    options: SearchOptions, space: SearchSpace, plan: SearchPlan, paths: ExperimentPaths
) -> tuple[list[Any], bool]:
    trainable = _trainable(options, plan)
    if options.resume and tune.Tuner.can_restore(paths.ray_path):
        tuner = tune.Tuner.restore(paths.ray_path, trainable=trainable, resume_unfinished=True)
    else:
        tuner = tune.Tuner(
            trainable,
            param_space={**plan.workload, "seed": options.seed},
            tune_config=_tune_config(options, space, plan, paths),
            run_config=_run_config(options, plan, paths),
        )
    results = tuner.fit()
    interrupted = _tune_was_interrupted()
    return list(results._experiment_analysis.trials), interrupted


def _tune_was_interrupted() -> bool:
    """Whether Ctrl-C stopped ``Tuner.fit`` (which then returns normally, state saved).

    Tune installs its own SIGINT handler for the run and puts the previous one back when the
    signal arrives; its handler still in place means no interruption. Ctrl-C works normally
    again afterwards (during re-measuring).
    """
    if threading.current_thread() is not threading.main_thread():
        return False  # Tune catches no signals outside the main thread
    if os.environ.get("TUNE_DISABLE_SIGINT_HANDLER", "0") != "0":
        return False
    handler = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return getattr(handler, "__name__", "") != "signal_interrupt_tune_run"


def _trainable(options: SearchOptions, plan: SearchPlan) -> Any:
    context = TrialContext(
        max_memory_bytes=options.max_memory_bytes,
        probe_steps=options.probe_steps,
        threads=plan.torch_threads,
        device=plan.trial_device,
    )
    resources = {"cpu": plan.cpus_per_trial, "gpu": plan.gpus_per_trial}
    return tune.with_resources(tune.with_parameters(run_trial, context=context), resources)


def _tune_config(
    options: SearchOptions, space: SearchSpace, plan: SearchPlan, paths: ExperimentPaths
) -> tune.TuneConfig:
    budget = plan.num_samples if plan.num_samples > 0 else None
    searcher = ConstrainedOptunaSearch(
        space=SpaceSampler(space.ref, plan.cuda),
        metric=objective_metrics(options.objective),
        mode=objective_directions(options.objective),
        sampler=make_sampler(
            options.sampler,
            seed=options.seed,
            budget=budget,
            concurrency=plan.concurrency,
            grid=space.grid,
        ),
        study_name=paths.name,
        storage=optuna.storages.RDBStorage(paths.study_url),
    )
    return tune.TuneConfig(
        search_alg=ConcurrencyLimiter(searcher, max_concurrent=plan.concurrency),
        scheduler=_scheduler(options),
        num_samples=plan.num_samples,
        time_budget_s=options.time_budget_s,
        reuse_actors=False,
    )


def _scheduler(options: SearchOptions) -> TrialScheduler:
    """ASHA for a single objective; Pareto searches run every trial to its end."""
    if options.multi_objective or not options.early_stopping:
        return FIFOScheduler()
    (metric,) = objective_metrics(options.objective)
    return ASHAScheduler(metric=metric, mode="max", grace_period=1, reduction_factor=3)


def _run_config(options: SearchOptions, plan: SearchPlan, paths: ExperimentPaths) -> Any:
    total = plan.num_samples if plan.num_samples > 0 else None
    return tune.RunConfig(
        name=paths.name,
        storage_path=paths.storage,
        failure_config=tune.FailureConfig(max_failures=options.max_failures),
        checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
        callbacks=[ProgressPrinter(total=total)],
        verbose=1 if options.verbose else 0,
    )


def _record(trial: Any) -> TrialRecord:
    return TrialRecord(
        trial_id=trial.trial_id,
        config=dict(trial.config),
        metrics=dict(trial.last_result or {}),
        ray_status=str(trial.status),
    )


def _reconcile_study(paths: ExperimentPaths, records: list[TrialRecord]) -> None:
    """Close Optuna trials that no Ray trial will ever finish (asked just before a crash)."""
    study = optuna.load_study(study_name=paths.name, storage=paths.study_url)
    ray_ids = {record.trial_id for record in records}
    for frozen in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        if frozen.user_attrs.get(RAY_TRIAL_ID_ATTR) in ray_ids:
            continue  # its Ray trial finished; the searcher told it already or will not
        study._storage.set_trial_user_attr(frozen._trial_id, "orphaned", True)
        study.tell(frozen.number, state=optuna.trial.TrialState.FAIL)


def _remeasure(
    options: SearchOptions, plan: SearchPlan, paths: ExperimentPaths, records: list[TrialRecord]
) -> None:
    candidates = pick_candidates(records, objective=options.objective, top=options.remeasure_top)
    if not candidates:
        return
    print(f"Re-measuring throughput of the top {len(candidates)} candidate(s), one at a time, "
          f"{options.remeasure_repeats} repeats each ...", flush=True)  # fmt: skip
    rows = remeasure(
        candidates,
        steps=max(REMEASURE_STEPS, options.probe_steps),
        repeats=options.remeasure_repeats,
        num_cpus=plan.cpus_per_trial,
        threads=plan.torch_threads,
        num_gpus=1.0 if plan.gpus_per_trial > 0 else 0.0,  # a whole GPU: no sharing here
        device=plan.trial_device,
    )
    write_remeasure_csv(rows, paths.local / REMEASURE_FILE)


def _report(options: SearchOptions, paths: ExperimentPaths) -> Path | None:
    try:
        from tuner.report import write_report
    except ImportError:
        return None
    out_dir = Path(options.reports_dir).resolve() / paths.name
    try:
        write_report(paths.local, out_dir=out_dir)
    except Exception as exc:  # the search's results stand even when the report fails
        print(f"warning: the report failed ({type(exc).__name__}: {exc}); "
              f"run `python -m tuner report {paths.local}` to retry.")  # fmt: skip
        return None
    return out_dir


def _metadata(
    options: SearchOptions,
    space: SearchSpace,
    plan: SearchPlan,
    paths: ExperimentPaths,
    info: cluster.ClusterInfo,
) -> dict[str, Any]:
    metrics = objective_metrics(options.objective)
    return {
        "name": paths.name,
        "space": space.name,
        "space_source": space.source,
        "workload_kind": plan.workload_kind,
        "workload": plan.workload,
        "objective": options.objective,
        "objectives": [
            {"metric": m, "direction": d}
            for m, d in zip(metrics, objective_directions(options.objective), strict=True)
        ],
        "sampler": options.sampler,
        "seed": options.seed,
        "num_samples": plan.num_samples,
        "time_budget_s": options.time_budget_s,
        "max_memory_bytes": options.max_memory_bytes,
        "concurrency": plan.concurrency,
        "resources_per_trial": {"cpu": plan.cpus_per_trial, "gpu": plan.gpus_per_trial},
        "gpus_shared": plan.gpus_shared,
        "early_stopping": "asha" if isinstance(_scheduler(options), ASHAScheduler) else None,
        "cluster": dataclasses.asdict(info),
        "environment": environment(),
        "study": {"path": str(paths.local / "study.db"), "name": paths.name},
        "ray_experiment_path": paths.ray_path,
        "started_at": now(),
        "ended_at": None,
        "state": "running",
        "options": {**dataclasses.asdict(options), "overrides": dict(options.overrides)},
    }


def _print_start(options: SearchOptions, plan: SearchPlan, paths: ExperimentPaths) -> None:
    samples = "until the time budget" if plan.num_samples < 0 else f"{plan.num_samples} trials"
    gpu = f", {plan.gpus_per_trial:g} GPU" if plan.gpus_per_trial else ""
    shared = " (GPUs SHARED between trials: throughput is distorted)" if plan.gpus_shared else ""
    print(
        f"{'Resuming' if options.resume else 'Searching'} {options.space} "
        f"[{plan.workload_kind} workload: {plan.workload.get('model')} on "
        f"{plan.workload.get('data')} @ {plan.workload.get('img_size')}px]: {samples}, "
        f"objective {options.objective}, sampler {options.sampler}, "
        f"{plan.concurrency} at a time, {plan.cpus_per_trial:g} CPU{gpu} per trial{shared}\n"
        f"Experiment folder: {paths.local}",
        flush=True,
    )


def _quiet_ray(*, verbose: bool) -> None:
    """Our one line per trial replaces Ray's tables and its checkpoint-frequency warnings."""
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    if not verbose:
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")


def _node_cpus() -> list[float]:
    cpus = [node["Resources"].get("CPU", 0.0) for node in ray.nodes() if node.get("Alive")]
    return [c for c in cpus if c > 0] or [1.0]
