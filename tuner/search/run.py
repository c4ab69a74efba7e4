"""``run_search``: a Ray Tune ``Tuner`` over the trainable, driven by Optuna, then re-measured.

Flow: the checks that need no Ray (options, space, workload: a usage error fails in seconds)
-> the experiment's driver lock (one driver per folder, held to the end) -> connect to Ray ->
plan resources -> Tuner (new or restored, :mod:`tuner.search.tune_setup`) with
``ConstrainedOptunaSearch`` (SQLite study in the experiment folder) -> reconcile the study with
Ray's trials -> load the experiment -> re-measure the top candidates (and load it again) ->
decide once -> the technique effects around the pick -> metadata -> summary. The folder is read
at most twice and the metadata written twice (at the start and at the end; once more when the
fit is interrupted). Ctrl-C in any phase ends in the summary so far and the command that
continues it. :class:`SearchOutcome` hands the :class:`~tuner.experiment.Experiment` and the
:class:`~tuner.answer.Answer` on: the report is the caller's next step (``tuner search`` writes
it from them); this package never imports it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import shlex
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

import optuna
import pandas as pd
import ray
from ray import tune

from tuner.answer import Answer, decide
from tuner.errors import EXIT_RUNTIME, TunerError, TunerRuntimeError
from tuner.experiment import (
    METADATA_FILE,
    PROBE_CACHE_FILE,
    STUDY_TRIAL_ID_ATTR,
    Experiment,
    load_experiment,
    update_metadata,
    write_metadata,
)
from tuner.experiment.lock import driver_lock, refuse_if_held
from tuner.objectives import objective_directions, objective_metrics
from tuner.record import ENDED_AT, KIND, MAX_MEMORY_BYTES, REPORTED_UNIX_S, STARTED_AT
from tuner.search import cluster, tune_setup
from tuner.search.after_search import effects_around, remeasure_candidates
from tuner.search.design import startup_design
from tuner.search.experiment import ExperimentPaths, environment, now, options_to_resume
from tuner.search.machine_cache import cache_dir
from tuner.search.options import SearchOptions
from tuner.search.plan import SearchPlan, SpaceProfile, check_space, draft_plan, make_plan
from tuner.search.preflight import check_workload
from tuner.search.probe_cache import machine_cache_line, start_cache
from tuner.search.summary import print_summary
from tuner.search.warm_start import read_warm_start, warm_start
from tuner.spaces import SearchSpace, get_space

__all__ = ["SearchOutcome", "TrialRecord", "run_search"]


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
        TunerError: a bad space, option, workload override or cluster address; another live
            driver on the experiment (:class:`~tuner.experiment.lock.ExperimentLocked`).
    """
    name = options.name or _default_name(options.space)
    paths = ExperimentPaths.of(options.storage, name)
    refuse_if_held(paths.local)  # before anything else: the one line that says who drives it
    if options.resume:
        options = options_to_resume(
            paths, resume=True, address=options.address, verbose=options.verbose
        )
    else:
        _refuse_existing(paths)
    space = get_space(options.space)
    options = dataclasses.replace(options, name=name, space=space.ref)
    checked = None if options.resume else _check_before_ray(options, space)
    with driver_lock(paths.local, command=shlex.join(["tuner", *sys.argv[1:]])):
        if not options.resume:
            _refuse_existing(paths)  # another driver finished one of this name meanwhile
        _quiet_ray(verbose=options.verbose)
        info = cluster.connect(address=options.address)
        try:
            plan = make_plan(options, space, node_cpus=_node_cpus(), total_gpus=info.total_gpus)
            profile = _profile(space, plan, checked)
            earlier = checked.earlier if checked else None
            return _search(options, space, plan, paths, info, profile, earlier)
        finally:
            if info.is_local:
                cluster.shutdown()


def _default_name(space: str) -> str:
    """``<space file stem>-<time>``, the stem cut to what --name allows (an odd file name is no
    fault of a --name the user did not give)."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(space).stem).lstrip("_.-") or "search"
    return f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def _refuse_existing(paths: ExperimentPaths) -> None:
    if (paths.local / METADATA_FILE).exists():
        raise TunerError(
            f"Experiment {paths.name!r} already exists in {paths.local.parent}; continue it "
            "with --resume or pick another --name."
        )


@dataclasses.dataclass(frozen=True)
class _Checked:
    """What the checks before Ray found, for the device the driver expects."""

    cuda: bool
    profile: SpaceProfile
    earlier: Experiment | None  # --warm-start's experiment


def _check_before_ray(options: SearchOptions, space: SearchSpace) -> _Checked:
    """Every check of a new search that needs no cluster (the space builds, the data and the
    model exist, each batch size fits, --warm-start names an experiment of this space), for the
    device the trials will most likely get: a usage error ends in seconds, before Ray starts."""
    cuda = _expect_cuda(options)
    draft = draft_plan(options, space, cuda=cuda)
    profile = check_space(space, draft)
    check_workload(draft, profile)  # a bad workload fails here, once, in one line
    # A remote cluster's device may differ from this guess, and its workload with it.
    workload = None if options.address else draft.workload
    earlier = read_warm_start(options, space_name=space.name, workload=workload)
    return _Checked(cuda, profile, earlier)


def _expect_cuda(options: SearchOptions) -> bool:
    if options.gpus_per_trial is not None:
        return options.gpus_per_trial > 0
    import torch

    return torch.cuda.is_available()  # a remote cluster may differ: checked again after


def _profile(space: SearchSpace, plan: SearchPlan, checked: _Checked | None) -> SpaceProfile | None:
    """The space's profile for the planned device (None on resume: the metadata has it)."""
    if checked is None:
        return None
    if checked.cuda == plan.cuda:
        return checked.profile
    profile = check_space(space, plan)  # the cluster's device differs from the driver's guess
    check_workload(plan, profile)
    return profile


def _search(
    options: SearchOptions,
    space: SearchSpace,
    plan: SearchPlan,
    paths: ExperimentPaths,
    info: cluster.ClusterInfo,
    profile: SpaceProfile | None,
    earlier: Experiment | None = None,
) -> SearchOutcome:
    started = time.time()
    design: list[dict[str, Any]] = []
    if profile is None:
        metadata = update_metadata(paths.local, state="running", resumed_at=now())
    else:
        budget = plan.num_samples if plan.num_samples > 0 else None
        design = startup_design(profile, budget=budget, seed=options.seed)
        design, warm = warm_start(
            options, plan, profile, paths, space_name=space.name, design=design, earlier=earlier
        )
        metadata = {
            **_metadata(options, space, plan, paths, info, profile, design),
            **({"warm_start": warm} if warm else {}),
        }
        write_metadata(paths.local, metadata)
    search_only = tuple(metadata.get("search_only_params", ()))
    _print_start(options, plan, paths, profile)
    if metadata.get("warm_start"):
        print(metadata["warm_start"]["summary"], flush=True)
    try:
        with cluster.watch(on_lost=lambda what: _lost_cluster(paths, options, what)):
            trials, interrupted, fit = _fit(options, space, plan, paths, search_only, design)
    except KeyboardInterrupt:  # before Tune's own handler took over (start-up, restore)
        _mark_interrupted(paths)
        _summary_so_far(paths)
        raise
    except ray.exceptions.RayError as exc:  # Ray's own processes failed under the driver
        _mark_interrupted(paths)
        what = f"Ray ({type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]})"
        raise TunerRuntimeError(_lost_message(paths, options, what)) from exc
    records = [_record(trial) for trial in trials]
    finished = not interrupted and all(t.status in ("TERMINATED", "ERROR") for t in trials)
    orphans = _reconcile_study(paths, records) if finished else []
    alone = finished and plan.max_workers == 1  # both measure one process alone
    try:
        experiment, answer, after = _after_trials(options, plan, paths, search_only, alone)
    except BaseException:  # a step after the trials failed: the trials' results stay resumable
        _mark_interrupted(paths)
        raise
    if finished and not alone:
        after["skipped_after_trials"] = "data-parallel trials (both steps measure one process)"
    ended = finished and not after.get("interrupted_during")
    state = "finished" if ended else "interrupted"
    end = {"state": state, ENDED_AT: now(), "num_trials": len(records), **fit, **after}
    experiment = experiment.with_effects(update_metadata(paths.local, **end))
    paths.upload()
    resumed = _resumed(experiment, started, orphans) if options.resume else None
    print_summary(experiment, answer, paths=paths, state=state, resumed=resumed)
    return SearchOutcome(paths.local, state, records, experiment, answer)


def _after_trials(
    options: SearchOptions,
    plan: SearchPlan,
    paths: ExperimentPaths,
    search_only: tuple[str, ...],
    alone: bool,
) -> tuple[Experiment, Answer, dict[str, Any]]:
    """Re-measurement and the technique effects (when the trials finished, each run alone in
    one process; a data-parallel search skips both), the answer, and
    what the metadata records of them; Ctrl-C here keeps what was done and says which step
    it stopped."""
    experiment = load_experiment(paths.local)
    answer: Answer | None = None
    after: dict[str, Any] = {"interrupted_during": None}  # a resumed run clears an old one
    step = "re-measurement"
    try:
        if alone:
            failures, wrote = remeasure_candidates(options, plan, paths, experiment, search_only)
            after["remeasure_failures"] = failures
            if wrote:
                experiment = load_experiment(paths.local)  # with the re-measurements
        answer = decide(experiment)
        step = "technique effects"
        if alone:
            after.update(effects_around(options, plan, paths, experiment, answer, search_only))
    except KeyboardInterrupt:
        print(f"\nInterrupted during the {step}; what finished before it is kept.", flush=True)
        after["interrupted_during"] = step
    return experiment, decide(experiment) if answer is None else answer, after


def _summary_so_far(paths: ExperimentPaths) -> None:
    """Ctrl-C before the trials ended: what finished, and the exact command to go on."""
    with contextlib.suppress(Exception):  # a folder too new to read still gets the command
        experiment = load_experiment(paths.local)
        print_summary(
            experiment, decide(experiment), paths=paths, state="interrupted", resumed=None
        )
        return
    print(f"Continue it with:  {paths.resume_command()}", flush=True)


def _mark_interrupted(paths: ExperimentPaths) -> None:
    update_metadata(paths.local, state="interrupted", **{ENDED_AT: now()})
    paths.upload()


def _resumed(experiment: Experiment, started: float, orphans: list[int]) -> dict[str, Any]:
    """How many trials had ended before this driver started, and how many ended since."""
    trials = experiment.trials
    ended = trials[KIND] != "incomplete"
    reported = trials.get(REPORTED_UNIX_S, pd.Series(float("nan"), index=trials.index))
    before = ended & (reported.astype(float) < started)  # NaN: never reported, not before
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
        tune_setup.cache_namespace(paths),
        machine_dir=cache_dir(),
        fresh=options.fresh_probes,
        experiment=paths.name,
    )
    trainable = tune_setup.trainable(options, plan, paths, search_only)
    if options.resume and tune.Tuner.can_restore(paths.ray_path):
        tuner = tune.Tuner.restore(paths.ray_path, trainable=trainable, resume_unfinished=True)
    else:
        tuner = tune.Tuner(
            trainable,
            param_space={**plan.workload, "seed": options.seed},
            tune_config=tune_setup.tune_config(options, space, plan, paths, design),
            run_config=tune_setup.run_config(options, plan, paths),
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
        "pinned_params": profile.pinned,
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
        "search_time_budget_s": options.search_time_budget_s,
        MAX_MEMORY_BYTES: options.max_memory_bytes,
        "concurrency": plan.concurrency,
        "resources_per_trial": {"cpu": plan.cpus_per_trial, "gpu": plan.gpus_per_trial},
        "gpus_shared": plan.gpus_shared,
        "early_stopping": tune_setup.early_stopping_name(options),
        "cluster": dataclasses.asdict(info),
        "environment": environment(),
        "study": {"path": str(paths.study_file), "name": paths.name},
        "ray_experiment_path": paths.ray_path,
        STARTED_AT: now(),
        ENDED_AT: None,
        "state": "running",
        "options": {**dataclasses.asdict(options), "overrides": dict(options.overrides)},
    }


def _print_start(
    options: SearchOptions, plan: SearchPlan, paths: ExperimentPaths, profile: SpaceProfile | None
) -> None:
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
    if profile is not None and profile.pinned:
        fixed = ", ".join(f"{name}={plan.fixed[name]!r}" for name in profile.pinned)
        print(f"Fixed by --set (out of the space, every trial runs it): {fixed}", flush=True)


def _quiet_ray(*, verbose: bool) -> None:
    """Our one line per trial replaces Ray's tables and its checkpoint-frequency warnings, and
    its traceback per failed attempt (the trial's line names the error; error.txt keeps it)."""
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    # Ray's "Resume experiment with: Tuner.restore(...)" after Ctrl-C: the summary says how
    # to continue a search (tuner search --resume), which Ray's line would contradict.
    logging.getLogger("ray.tune.tune").addFilter(_no_restore_hint)
    if not verbose:
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
        os.environ.setdefault("TUNE_PRINT_ALL_TRIAL_ERRORS", "0")


def _no_restore_hint(record: logging.LogRecord) -> bool:
    return "Tuner.restore(" not in record.getMessage()


def _node_cpus() -> list[float]:
    cpus = [node["Resources"].get("CPU", 0.0) for node in ray.nodes() if node.get("Alive")]
    return [c for c in cpus if c > 0] or [1.0]
