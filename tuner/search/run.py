"""``run_search``: a Ray Tune ``Tuner`` over the trainable, driven by Optuna, then re-measured.

Flow: connect to Ray -> plan resources and workload -> check the space -> Tuner (new or
restored) with ``ConstrainedOptunaSearch`` (SQLite study in the experiment folder) ->
reconcile the study with Ray's trials -> load the experiment -> re-measure the top candidates
(and load it again) -> decide once -> the technique effects around the pick -> metadata ->
summary. The folder is read at most twice and the metadata written twice (at the start and at
the end; once more when the fit is interrupted). :class:`SearchOutcome` hands the
:class:`~tuner.experiment.Experiment` and the :class:`~tuner.answer.Answer` on: the report is
the caller's next step (``tuner search`` writes it from them); this package never imports it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

import optuna
import ray
from ray import tune
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, TrialScheduler
from ray.tune.search import ConcurrencyLimiter

from tuner.answer import Answer, candidates, decide
from tuner.errors import EXIT_RUNTIME, TunerError, TunerRuntimeError
from tuner.experiment import (
    EFFECTS_FILE,
    METADATA_FILE,
    PROBE_CACHE_FILE,
    REMEASURE_FILE,
    STUDY_TRIAL_ID_ATTR,
    Experiment,
    load_experiment,
    update_metadata,
    write_metadata,
)
from tuner.objectives import (
    objective_directions,
    objective_metrics,
    objectives_of,
    rank_candidates,
)
from tuner.record import ENDED_AT, KIND, MAX_MEMORY_BYTES, REPORTED_UNIX_S, STARTED_AT, TRIAL_ID
from tuner.search import cluster, data_parallel
from tuner.search.after_search import measure_effects, remeasure, write_remeasure_csv
from tuner.search.design import startup_design
from tuner.search.experiment import ExperimentPaths, environment, now, options_to_resume
from tuner.search.loggers import logger_callbacks
from tuner.search.machine_cache import cache_dir
from tuner.search.options import SearchOptions
from tuner.search.plan import SearchPlan, SpaceProfile, check_space, make_plan
from tuner.search.preflight import check_workload
from tuner.search.probe_cache import machine_cache_line, start_cache
from tuner.search.progress import ProgressPrinter
from tuner.search.samplers import make_sampler
from tuner.search.scheduler import ParetoASHA
from tuner.search.searcher import ConstrainedOptunaSearch
from tuner.search.summary import print_summary
from tuner.search.tracking import trial_dirname
from tuner.search.trainable import TrialContext, run_trial
from tuner.search.warm_start import warm_start
from tuner.spaces import SearchSpace, SpaceSampler, get_space

__all__ = ["SearchOutcome", "TrialRecord", "run_search"]

REMEASURE_STEPS = 20


@dataclasses.dataclass(frozen=True)
class TrialRecord:
    """One trial as the driver saw it at the end: Ray's id, config, last metrics and status."""

    trial_id: str
    config: dict[str, Any]
    metrics: dict[str, Any]
    ray_status: str  # TERMINATED | ERROR | ...


@dataclasses.dataclass(frozen=True)
class SearchOutcome:
    """Where a search's results are, what happened, and what it found."""

    experiment_dir: Path
    state: str  # finished | interrupted
    records: list[TrialRecord]
    experiment: Experiment  # the folder as read at the end (after re-measurement and effects)
    answer: Answer  # decided once, on ``experiment``

    @property
    def usable(self) -> int:
        """How many trials can be recommended (kind ok, every objective measured)."""
        return int(self.answer.trials["candidate"].sum())


def run_search(options: SearchOptions) -> SearchOutcome:
    """Run a search (or continue one with ``resume=True``) and return where its results are.

    Raises:
        TunerError: a bad space, option, workload override or cluster address.
    """
    name = options.name or f"{Path(options.space).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    paths = ExperimentPaths.of(options.storage, name)
    if options.resume:
        options = options_to_resume(
            paths, resume=True, address=options.address, verbose=options.verbose
        )
    elif (paths.local / METADATA_FILE).exists():
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
    started = time.time()
    design: list[dict[str, Any]] = []
    if options.resume:
        metadata = update_metadata(paths.local, state="running", resumed_at=now())
    else:
        profile = check_space(space, plan)
        check_workload(plan, profile)  # a bad workload fails here, once, in one line
        budget = plan.num_samples if plan.num_samples > 0 else None
        design = startup_design(profile, budget=budget, seed=options.seed)
        design, warm = warm_start(
            options, plan, profile, paths, space_name=space.name, design=design
        )
        metadata = {
            **_metadata(options, space, plan, paths, info, profile, design),
            **({"warm_start": warm} if warm else {}),
        }
        write_metadata(paths.local, metadata)
    search_only = tuple(metadata.get("search_only_params", ()))
    _print_start(options, plan, paths)
    if metadata.get("warm_start"):
        print(metadata["warm_start"]["summary"], flush=True)
    try:
        with cluster.watch(on_lost=lambda what: _lost_cluster(paths, options, what)):
            trials, interrupted, fit = _fit(options, space, plan, paths, search_only, design)
    except KeyboardInterrupt:
        _mark_interrupted(paths)
        raise
    except ray.exceptions.RayError as exc:  # Ray's own processes failed under the driver
        _mark_interrupted(paths)
        what = f"Ray ({type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]})"
        raise TunerRuntimeError(_lost_message(paths, options, what)) from exc
    records = [_record(trial) for trial in trials]
    finished = not interrupted and all(t.status in ("TERMINATED", "ERROR") for t in trials)
    state = "finished" if finished else "interrupted"
    orphans = _reconcile_study(paths, records) if finished else []
    experiment = load_experiment(paths.local)
    alone = finished and plan.max_workers == 1  # both measure one process alone
    if alone and _remeasure(options, plan, paths, experiment, search_only):
        experiment = load_experiment(paths.local)  # with the re-measurements
    answer = decide(experiment)
    effects = _effects(options, plan, paths, experiment, answer, search_only) if alone else {}
    end = {"state": state, ENDED_AT: now(), "num_trials": len(records), **fit, **effects}
    experiment = experiment.with_effects(update_metadata(paths.local, **end))
    paths.upload()
    resumed = _resumed(experiment, started, orphans) if options.resume else None
    print_summary(experiment, answer, paths=paths, state=state, resumed=resumed)
    return SearchOutcome(paths.local, state, records, experiment, answer)


def _mark_interrupted(paths: ExperimentPaths) -> None:
    update_metadata(paths.local, state="interrupted", **{ENDED_AT: now()})
    paths.upload()


def _resumed(experiment: Experiment, started: float, orphans: list[int]) -> dict[str, Any]:
    """How many trials had ended before this driver started, and how many ended since."""
    trials = experiment.trials
    ended = trials[KIND] != "incomplete"
    before = ended & (trials[REPORTED_UNIX_S].astype(float) < started)
    return {"before": int(before.sum()), "after": int((ended & ~before).sum()), "orphans": orphans}


def _fit(
    options: SearchOptions,
    space: SearchSpace,
    plan: SearchPlan,
    paths: ExperimentPaths,
    search_only: tuple[str, ...],
    design: list[dict[str, Any]],
) -> tuple[list[Any], bool, dict[str, Any]]:
    # The handle keeps the (non-detached) cache actor alive for the whole fit.
    cache = start_cache(
        paths.local / PROBE_CACHE_FILE,
        _cache_namespace(paths),
        machine_dir=cache_dir(),
        fresh=options.fresh_probes,
        experiment=paths.name,
    )
    trainable = _trainable(options, plan, paths, search_only)
    if options.resume and tune.Tuner.can_restore(paths.ray_path):
        tuner = tune.Tuner.restore(paths.ray_path, trainable=trainable, resume_unfinished=True)
    else:
        tuner = tune.Tuner(
            trainable,
            param_space={**plan.workload, "seed": options.seed},
            tune_config=_tune_config(options, space, plan, paths, design),
            run_config=_run_config(options, plan, paths),
        )
    started = time.perf_counter()
    results = tuner.fit()
    interrupted = _tune_was_interrupted()
    fit = {"fit_time_s": time.perf_counter() - started, **_cache_stats(cache)}
    return list(results._experiment_analysis.trials), interrupted, fit


def _cache_stats(cache: Any) -> dict[str, Any]:
    try:
        stats = ray.get(cache.stats.remote(), timeout=10)
    except Exception:  # statistics only: a dead cache actor costs nothing but this line
        return {}
    print(machine_cache_line(stats), flush=True)
    return {"probe_cache": stats}


def _lost_cluster(paths: ExperimentPaths, options: SearchOptions, what: str) -> NoReturn:
    """Ray is about to end this driver (its raylet or cluster is gone; from the watch thread):
    say so in one line, mark the experiment resumable, and exit as a runtime error."""
    print(f"error: {_lost_message(paths, options, what)}", file=sys.stderr, flush=True)
    with contextlib.suppress(Exception):  # best effort: the files Ray wrote already resume
        _mark_interrupted(paths)
    sys.stdout.flush()
    os._exit(EXIT_RUNTIME)


def _lost_message(paths: ExperimentPaths, options: SearchOptions, what: str) -> str:
    return (
        f"The search lost {what}; the trials that finished are saved in {paths.local}. "
        f"Continue with: {paths.resume_command(address=options.address)}"
    )


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


def _cache_namespace(paths: ExperimentPaths) -> str:
    return f"tuner-{paths.name}"


def _trainable(
    options: SearchOptions, plan: SearchPlan, paths: ExperimentPaths, search_only: tuple[str, ...]
) -> Any:
    context = TrialContext(
        max_memory_bytes=options.max_memory_bytes,
        probe_steps=options.probe_steps,
        threads=plan.torch_threads,
        device=plan.trial_device,
        search_only=search_only,
        speed_repeats=options.speed_repeats,
        cache_namespace=_cache_namespace(paths),
    )
    if plan.max_workers > 1:
        return data_parallel.trainable(context, plan, max_failures=options.max_failures)
    resources = {"cpu": plan.cpus_per_trial, "gpu": plan.gpus_per_trial}
    return tune.with_resources(tune.with_parameters(run_trial, context=context), resources)


def _tune_config(
    options: SearchOptions,
    space: SearchSpace,
    plan: SearchPlan,
    paths: ExperimentPaths,
    design: list[dict[str, Any]],
) -> tune.TuneConfig:
    budget = plan.num_samples if plan.num_samples > 0 else None
    searcher = ConstrainedOptunaSearch(
        study_attrs=_study_attrs(options, space, plan),
        space=SpaceSampler(space.ref, plan.cuda),
        points_to_evaluate=design or None,
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
        scheduler=_scheduler(options, plan),
        num_samples=plan.num_samples,
        time_budget_s=options.time_budget_s,
        # One worker process serves trial after trial: no process start and imports between
        # trials. Measurements stay per trial: CUDA peaks are reset and the cache freed per run,
        # CPU memory is counted, not sampled from the process (tuner.engine.meters).
        reuse_actors=plan.max_workers == 1,  # a stopped data-parallel driver must end
        trial_dirname_creator=trial_dirname,
    )


def _scheduler(options: SearchOptions, plan: SearchPlan) -> TrialScheduler:
    """Early stopping: ParetoASHA (non-dominated rank, infeasible last) for the Pareto search,
    ASHA for a single objective; every trial to its end with --no-early-stopping."""
    if not options.early_stopping:
        return FIFOScheduler()
    metrics = objective_metrics(options.objective)
    if options.multi_objective:
        return ParetoASHA(
            metrics=metrics,
            directions=objective_directions(options.objective),
            max_reports=_evaluations(plan.workload),
        )
    return ASHAScheduler(metric=metrics[0], mode="max", grace_period=1, reduction_factor=3)


def _evaluations(workload: dict[str, Any]) -> int | None:
    """How many evaluations a full trial makes, when the workload fixes it (a step budget)."""
    steps, every = workload.get("steps"), workload.get("eval_every_steps")
    if workload.get("epochs") or not steps or not every:
        return None
    return math.ceil(steps / every)


def _run_config(options: SearchOptions, plan: SearchPlan, paths: ExperimentPaths) -> Any:
    total = plan.num_samples if plan.num_samples > 0 else None
    return tune.RunConfig(
        name=paths.name,
        storage_path=paths.storage,
        failure_config=tune.FailureConfig(max_failures=options.max_failures),
        checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
        callbacks=[
            ProgressPrinter(total=total),
            *logger_callbacks(
                mlflow_uri=options.mlflow,
                wandb_project=options.wandb,
                experiment=paths.name,
                space=options.space,
                experiment_dir=paths.local,
            ),
            *([data_parallel.PlacementGroupReaper()] if plan.max_workers > 1 else []),
        ],
        verbose=1 if options.verbose else 0,
    )


def _record(trial: Any) -> TrialRecord:
    return TrialRecord(
        trial_id=trial.trial_id,
        config=dict(trial.config),
        metrics=dict(trial.last_result or {}),
        ray_status=str(trial.status),
    )


def _reconcile_study(paths: ExperimentPaths, records: list[TrialRecord]) -> list[int]:
    """Close Optuna trials that no Ray trial will ever finish (asked just before a crash);
    return their numbers."""
    study = optuna.load_study(study_name=paths.name, storage=paths.study_url)
    ray_ids = {record.trial_id for record in records}
    closed = []
    for frozen in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        if frozen.user_attrs.get(STUDY_TRIAL_ID_ATTR) in ray_ids:
            continue  # its Ray trial finished; the searcher told it already or will not
        study._storage.set_trial_user_attr(frozen._trial_id, "orphaned", True)
        study.tell(frozen.number, state=optuna.trial.TrialState.FAIL)
        closed.append(frozen.number)
    return closed


def _remeasure(
    options: SearchOptions,
    plan: SearchPlan,
    paths: ExperimentPaths,
    experiment: Experiment,
    search_only: tuple[str, ...],
) -> bool:
    """Re-measure the top candidates; whether it wrote re-measurements."""
    objs = objectives_of(options.objective)
    top = rank_candidates(candidates(experiment.trials, objs), objs, top=options.remeasure_top)
    if top.empty:
        return False
    print(
        f"Re-measuring throughput of the top {len(top)} candidate(s) alone, interleaved, "
        f"{options.remeasure_repeats} to {options.remeasure_max_repeats} repeats ...",
        flush=True,
    )
    configs = [(tid, experiment.configs[tid]) for tid in top[TRIAL_ID]]
    rows = remeasure(
        configs,
        steps=max(REMEASURE_STEPS, options.probe_steps),
        min_repeats=options.remeasure_repeats,
        max_repeats=options.remeasure_max_repeats,
        num_cpus=plan.cpus_per_trial,
        threads=plan.torch_threads,
        num_gpus=1.0 if plan.gpus_per_trial > 0 else 0.0,  # a whole GPU: no sharing here
        device=plan.trial_device,
        search_only=search_only,
    )
    write_remeasure_csv(rows, paths.local / REMEASURE_FILE)
    return True


def _effects(
    options: SearchOptions,
    plan: SearchPlan,
    paths: ExperimentPaths,
    experiment: Experiment,
    answer: Answer,
    search_only: tuple[str, ...],
) -> dict[str, Any]:
    """The technique effects around the recommended config, as the metadata records them."""
    pick = answer.recommended
    if options.effects_repeats < 1 or pick is None:
        return {}
    trial_id = str(pick[TRIAL_ID])
    print(
        f"Measuring each technique's effect around the recommended config {trial_id}, "
        f"{options.effects_repeats} interleaved repeats ...",
        flush=True,
    )
    info = measure_effects(
        experiment.configs[trial_id],
        steps=max(REMEASURE_STEPS, options.probe_steps),
        repeats=options.effects_repeats,
        num_cpus=plan.cpus_per_trial,
        num_gpus=1.0 if plan.gpus_per_trial > 0 else 0.0,
        threads=plan.torch_threads,
        device=plan.trial_device,
        search_only=search_only,
        out=paths.local / EFFECTS_FILE,
    )
    return {"effects": {TRIAL_ID: trial_id, **info}}


def _study_attrs(options: SearchOptions, space: SearchSpace, plan: SearchPlan) -> dict[str, Any]:
    """What optuna-dashboard shows about the study: the question and the machine."""
    env = environment()
    return {
        "space": space.name,
        "workload_kind": plan.workload_kind,
        "workload": plan.workload,
        "objective": options.objective,
        MAX_MEMORY_BYTES: options.max_memory_bytes,
        "hardware": {
            "host": env["host"],
            "gpus": env["driver_gpus"],
            "gpus_per_trial": plan.gpus_per_trial,
            "cpus_per_trial": plan.cpus_per_trial,
        },
        "versions": {k: env[k] for k in ("torch", "cuda", "timm", "ray", "optuna")},
    }


def _metadata(
    options: SearchOptions,
    space: SearchSpace,
    plan: SearchPlan,
    paths: ExperimentPaths,
    info: cluster.ClusterInfo,
    profile: SpaceProfile,
    design: list[dict[str, Any]],
) -> dict[str, Any]:
    metrics = objective_metrics(options.objective)
    return {
        "name": paths.name,
        "space": space.name,
        "space_source": space.source,
        "search_only_params": profile.search_only,
        "startup_design": design,
        "speed_probes": {"repeats": options.speed_repeats, "steps": options.probe_steps},
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
        MAX_MEMORY_BYTES: options.max_memory_bytes,
        "concurrency": plan.concurrency,
        "resources_per_trial": {"cpu": plan.cpus_per_trial, "gpu": plan.gpus_per_trial},
        "gpus_shared": plan.gpus_shared,
        "early_stopping": _early_stopping_name(options),
        "cluster": dataclasses.asdict(info),
        "environment": environment(),
        "study": {"path": str(paths.study_file), "name": paths.name},
        "ray_experiment_path": paths.ray_path,
        STARTED_AT: now(),
        ENDED_AT: None,
        "state": "running",
        "options": {**dataclasses.asdict(options), "overrides": dict(options.overrides)},
    }


def _early_stopping_name(options: SearchOptions) -> str | None:
    if not options.early_stopping:
        return None
    if options.multi_objective:
        return "pareto-asha (eta 3, first rung after a third of the evaluations)"
    return "asha"


def _print_start(options: SearchOptions, plan: SearchPlan, paths: ExperimentPaths) -> None:
    samples = "until the time budget" if plan.num_samples < 0 else f"{plan.num_samples} trials"
    gpu = f", {plan.gpus_per_trial:g} GPU" if plan.gpus_per_trial else ""
    shared = " (GPUs SHARED between trials: throughput is distorted)" if plan.gpus_shared else ""
    workers = f"{plan.workers_per_trial} workers x " if plan.max_workers > 1 else ""
    print(
        f"{'Resuming' if options.resume else 'Searching'} {options.space} "
        f"[{plan.workload_kind} workload: {plan.workload.get('model')} on "
        f"{plan.workload.get('data')} @ {plan.workload.get('img_size')}px]: {samples}, "
        f"objective {options.objective}, sampler {options.sampler}, "
        f"{plan.concurrency} at a time, {workers}{plan.cpus_per_trial:g} CPU{gpu} per trial"
        f"{shared}\n"
        f"Experiment folder: {paths.local}",
        flush=True,
    )


def _quiet_ray(*, verbose: bool) -> None:
    """Our one line per trial replaces Ray's tables and its checkpoint-frequency warnings, and
    its traceback per failed attempt (the trial's line names the error; error.txt keeps it)."""
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    if not verbose:
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
        os.environ.setdefault("TUNE_PRINT_ALL_TRIAL_ERRORS", "0")


def _node_cpus() -> list[float]:
    cpus = [node["Resources"].get("CPU", 0.0) for node in ray.nodes() if node.get("Alive")]
    return [c for c in cpus if c > 0] or [1.0]
