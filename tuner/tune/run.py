"""``run_search``: the search's flow (docs/architecture.md, ``tune/run.py``). It returns the
``Experiment`` and the ``Answer`` in a :class:`SearchOutcome`; the caller writes the report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import pandas as pd
import ray
from ray import tune

from tuner.answer import Answer, decide
from tuner.errors import EXIT_RUNTIME, TunerRuntimeError, error_line, sigterm_as_ctrl_c
from tuner.experiment import (
    METADATA_FILE,
    PROBE_CACHE_FILE,
    STUDY_FILE,
    Experiment,
    load_experiment,
    read_metadata,
    update_metadata,
    write_metadata,
)
from tuner.experiment.limits import NUM_SAMPLES, TIME_BUDGET, settle_clock, start_clock, stop_clock
from tuner.experiment.lock import child_pids, record_helpers
from tuner.experiment.options import SearchOptions, options_record
from tuner.experiment.paths import ExperimentPaths
from tuner.experiment.start import said_if_stopped, start_search
from tuner.record import ENDED_AT, KIND, REPORTED_UNIX_S, TRIAL_ID
from tuner.report.console import print_start, print_summary
from tuner.spaces import SearchSpace
from tuner.speed.cache import machine_cache_line, probe_budget_line
from tuner.tune import _ray_internals as ray_internals
from tuner.tune import cluster, tune_setup
from tuner.tune.after_search import effects_around, remeasure_candidates, seeds_around
from tuner.tune.context import SearchContext, now, start_metadata, study_attrs
from tuner.tune.design import startup_design
from tuner.tune.plan import SpaceProfile, make_plan
from tuner.tune.preflight import Checked, Prepared, check_search, profile_for
from tuner.tune.probe_actor import start_cache
from tuner.tune.ray_log import ray_lines_to_file
from tuner.tune.searcher import close_interrupted, close_orphans, requeue_not_run
from tuner.tune.target_clients import tell_time_to_target
from tuner.tune.tracking import cut_results
from tuner.tune.warm_start import warm_start
from tuner.usercache import cache_dir

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
        return self.answer.candidates


def run_search(options: SearchOptions, *, prepared: Prepared | None = None) -> SearchOutcome:
    """Run a search (or continue one with ``resume=True``) and return where its results are.
    ``prepared``: what :func:`~tuner.tune.preflight.check_search` made of ``options`` already,
    inside :func:`~tuner.experiment.start.start_search`'s block (the driver lock held), where
    this runs (the API checks before it imports this module, which imports Ray).

    Raises:
        TunerError: a bad space, option, workload override or cluster address; another live
            driver on the experiment (:class:`~tuner.experiment.lock.ExperimentLocked`).
    """
    if prepared is None:
        with sigterm_as_ctrl_c(), start_search(options, check=check_search) as prepared:
            return run_search(options, prepared=prepared)
    with ray_lines_to_file(prepared.paths.local, verbose=prepared.options.verbose):
        return _run_prepared(prepared)


def _run_prepared(prepared: Prepared) -> SearchOutcome:
    options, space, paths = prepared.options, prepared.space, prepared.paths
    with said_if_stopped(paths, resume=options.resume):  # Ray's start: nothing written yet
        tune_setup.quiet_ray(verbose=options.verbose)
        existing = child_pids()  # the processes started from here on are this search's
        info = cluster.connect(address=options.address, runtime_env=_user_code_env(options, space))
    # After ray.init, whose own SIGTERM handler would end the driver mid-fit.
    try:
        with sigterm_as_ctrl_c():
            with said_if_stopped(paths, resume=options.resume):
                plan = make_plan(
                    options, space, node_cpus=cluster.node_cpus(), total_gpus=info.total_gpus
                )
                search = SearchContext(options, space, plan, paths)
                profile = profile_for(space, plan, prepared.checked)
            started = time.time()
            metadata, design = _begin_resumable(search, info, profile, prepared.checked)
            if info.is_local:  # what a kill -9 of this driver would leave running
                record_helpers(paths.local, existing=existing)
            search_only = tuple(metadata.get("search_only_params", ()))
            search = dataclasses.replace(search, search_only=search_only)
            return _search(search, design, metadata, started, prepared.began)
    finally:
        if info.is_local:
            cluster.shutdown()


def _begin_resumable(
    search: SearchContext,
    info: cluster.ClusterInfo,
    profile: SpaceProfile | None,
    checked: Checked | None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """:func:`_begin`; Ctrl-C or SIGTERM as it writes the metadata leaves the experiment
    interrupted, with the command that continues it."""
    try:
        return _begin(search, info, profile, checked.earlier if checked else None)
    except KeyboardInterrupt:
        if (search.paths.local / METADATA_FILE).is_file():
            _mark_interrupted(search.paths)
        print(f"\nContinue it with:  {search.paths.resume_command()}", flush=True)
        raise


def _user_code_env(options: SearchOptions, space: SearchSpace) -> dict[str, Any] | None:
    """Ray's runtime environment shipping the user's own model and data modules, which every
    workload of the space and the overrides can name."""
    workloads = [*space.workloads.values(), options.overrides]
    return cluster.user_code_env(
        str(w[key]) for w in workloads for key in ("model", "data") if key in w
    )


def _search(
    search: SearchContext,
    design: list[dict[str, Any]],
    metadata: dict[str, Any],  # as the search started (or resumed)
    started: float,  # time.time() when the search began (after Ray started)
    began: float,  # time.perf_counter() when the command began (--trust-budget's share)
) -> SearchOutcome:
    options, plan, paths = search.options, search.plan, search.paths
    try:
        with cluster.watch(on_lost=lambda what: _lost_cluster(search, what)):
            trials, interrupted, fit = _fit(search, design, metadata)
    except KeyboardInterrupt:  # before Tune's own handler took over (start-up, restore)
        _mark_interrupted(paths)
        _close_study(paths)
        _summary_so_far(paths)
        raise
    except ray.exceptions.RayError as exc:  # Ray's own processes failed under the driver
        _mark_interrupted(paths)
        what = f"Ray ({error_line(exc, limit=200)})"
        raise TunerRuntimeError(_lost_message(search, what)) from exc
    records = [
        TrialRecord(t.trial_id, dict(t.config), dict(t.last_result or {}), str(t.status))
        for t in trials
    ]
    finished = not interrupted and all(t.is_finished() for t in trials)
    if interrupted:
        _close_study(paths)
    ray_ids = {record.trial_id for record in records}
    cut = cut_results(trials)  # the trials its time budget stopped half-way: incomplete
    orphans = close_orphans(paths.name, paths.study_url, ray_ids, cut) if finished else []
    alone = finished and plan.max_world_size == 1  # both measure one process alone
    try:
        trust_s = options.trust_limit_s(time.perf_counter() - began)
        experiment, answer, after = _after_trials(search, alone, trust_s, metadata)
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
    _tell_time_to_target(experiment, answer, paths)
    print_summary(experiment, answer, paths=paths, state=state, resumed=resumed)
    return SearchOutcome(paths.local, state, records, experiment, answer)


def _tell_time_to_target(experiment: Experiment, answer: Answer, paths: ExperimentPaths) -> None:
    """The study, TensorBoard and the trackers get every trial's time to target; a client that
    fails costs a warning line."""
    try:
        failed = tell_time_to_target(
            experiment, answer, study_name=paths.name, study_url=paths.study_url
        )
    except Exception as exc:  # trials.csv and the report hold the same figures
        failed = [f"telling the time to target failed ({error_line(exc)})"]
    for line in failed:
        print(f"warning: {line}.")


def _begin(
    search: SearchContext,
    info: cluster.ClusterInfo,
    profile: SpaceProfile | None,
    earlier: Experiment | None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Write the metadata the search runs under (a resumed search only marks it running) and
    print the start line; return the metadata and the start-up design of a new search (after
    what --warm-start covers)."""
    design: list[dict[str, Any]] = []
    if profile is None:
        metadata = _resume_metadata(search)
    else:
        design = startup_design(profile, budget=search.plan.sample_budget, seed=search.options.seed)
        design, warm = warm_start(search, profile, design=design, earlier=earlier)
        metadata = {
            **start_metadata(search, info, profile, design),
            **({"warm_start": warm} if warm else {}),
        }
        write_metadata(search.paths.local, metadata)
    print_start(search, profile)
    if metadata.get("warm_start"):
        print(metadata["warm_start"]["summary"], flush=True)
    return metadata, design


def _resume_metadata(search: SearchContext) -> dict[str, Any]:
    """Mark a resumed search running, with the options a resume applied
    (tuner.tune.context.CHANGEABLE_ON_RESUME) and its limits (tuner.experiment.limits) kept
    for the runs after it. When a limit moved, the start-up design's trials an earlier end
    closed as not run are queued again: the search goes on past that end."""
    paths = search.paths
    settle_clock(paths.local)  # a killed run's time, before this run writes into the folder
    before = read_metadata(paths.local)
    options, plan = search.options, search.plan
    limits = {NUM_SAMPLES: plan.num_samples, TIME_BUDGET: options.search_time_budget_s}
    metadata = update_metadata(
        paths.local,
        state="running",
        resumed_at=now(),
        options=options_record(options),
        **limits,
    )
    moved = any(before.get(key) != value for key, value in limits.items())
    if (paths.local / STUDY_FILE).is_file():  # what an interrupt closed as not run, always
        requeued = requeue_not_run(paths.name, paths.study_url, interrupted_only=not moved)
        if requeued and moved:
            print(
                f"{requeued} start-up design trial(s) that an earlier end of the search never "
                "reached are queued again.",
                flush=True,
            )
    return metadata


def _after_trials(
    search: SearchContext, alone: bool, trust_s: float | None, metadata: dict[str, Any]
) -> tuple[Experiment, Answer, dict[str, Any]]:
    """Re-measurement and the technique effects (when the trials finished, each run alone in
    one process; a data-parallel search skips both) within ``trust_s`` seconds together, the
    answer, and what the metadata records of them; Ctrl-C here keeps what was done and says
    which step it stopped. A step an earlier run finished on the same trials is kept, never
    measured again (``metadata``: as this run began)."""
    experiment = load_experiment(search.paths.local)
    answer: Answer | None = None
    trials = _ended_trials(experiment)
    kept = _kept_steps(metadata, trials)
    after: dict[str, Any] = {"interrupted_during": None}  # a resumed run clears an old one
    done: list[str] = [step for step in _AFTER_STEPS if step in kept]
    step, started = _AFTER_STEPS[0], time.perf_counter()
    share = _REMEASURE_SHARE if search.options.effects_repeats else 1.0
    remeasure_s = None if trust_s is None else trust_s * share
    try:
        if alone and _run_step(step, kept, done):
            failures, info = remeasure_candidates(search, experiment, remeasure_s)
            after["remeasure_failures"] = failures
            if info is not None:
                after["remeasure"] = info
                experiment = load_experiment(search.paths.local)  # with the re-measurements
            _record_finished(search, after, done, trials)  # before the next step: a kill keeps it
        answer = decide(experiment)
        step = _AFTER_STEPS[1]
        if alone and _run_step(step, kept, done):
            left = _time_left(trust_s, started, keep=_EFFECTS_SHARE)
            after.update(seeds_around(search, experiment, answer, left))
            experiment = experiment.with_seeds()  # the seeds' runs, read
            answer = decide(experiment)
            _record_finished(search, after, done, trials)
        step = _AFTER_STEPS[2]
        if alone and _run_step(step, kept, done):
            left = _time_left(trust_s, started)
            after.update(effects_around(search, experiment, answer, left))
    except KeyboardInterrupt:
        print(f"\nInterrupted during the {step}; what finished before it is kept.", flush=True)
        after["interrupted_during"] = step
        if step in done and step not in kept:  # a step this run began (not one it skipped)
            done.remove(step)
    after[_FINISHED_AFTER_TRIALS] = {"steps": done, "trials": trials}
    return experiment, decide(experiment) if answer is None else answer, after


def _record_finished(
    search: SearchContext, after: dict[str, Any], done: list[str], trials: str
) -> None:
    """Record a step after the trials as it ends, with what it found: a kill -9 during the next
    one, then ``--resume``, keeps it instead of measuring it again (shorter)."""
    finished = {key: value for key, value in after.items() if key != "interrupted_during"}
    finished[_FINISHED_AFTER_TRIALS] = {"steps": list(done), "trials": trials}
    update_metadata(search.paths.local, **finished)


_AFTER_STEPS = ("re-measurement", "seed retraining", "technique effects")  # in their order
# The metadata's record of which of them finished, and on which ended trials.
_FINISHED_AFTER_TRIALS = "finished_after_trials"


def _run_step(step: str, kept: set[str], done: list[str]) -> bool:
    """Whether ``step`` runs now (counted as done from here: Ctrl-C takes it back); a kept one
    is said instead."""
    if step in kept:
        print(f"The {step} finished in an earlier run on these trials: kept.", flush=True)
        return False
    done.append(step)
    return True


def _kept_steps(metadata: dict[str, Any], trials: str) -> set[str]:
    """The steps after the trials an earlier run finished on the same ended trials: their
    files stand (a resume must not replace a finished measurement with a shorter one)."""
    record = metadata.get(_FINISHED_AFTER_TRIALS) or {}
    return set(record.get("steps", ())) if record.get("trials") == trials else set()


def _ended_trials(experiment: Experiment) -> str:
    """A digest of the trials that ended (id and kind): another set, other measurements."""
    ended = experiment.trials[experiment.trials[KIND] != "incomplete"]
    pairs = sorted(zip(ended[TRIAL_ID].astype(str), ended[KIND].astype(str), strict=True))
    return hashlib.sha256(json.dumps(pairs).encode()).hexdigest()[:16]


_REMEASURE_SHARE = 0.25  # of the trust budget: the effects have 8 arms to the re-measurement's 3
# Of the trust budget, what the seed retraining leaves the effects: the seeds' runs are whole
# trainings (each pick and the plain loop, 3 seeds), the effects' rounds short windows.
_EFFECTS_SHARE = 0.25


def _time_left(trust_s: float | None, started: float, keep: float = 0.0) -> float | None:
    """Seconds of the trust budget left since ``started`` (None: no limit), less the share
    ``keep`` of it that a later step keeps."""
    if trust_s is None:
        return None
    return max(0.0, trust_s * (1.0 - keep) - time.perf_counter() + started)


def _summary_so_far(paths: ExperimentPaths) -> None:
    """Ctrl-C before the trials ended: what finished, and the exact command to go on."""
    with contextlib.suppress(Exception):  # a folder too new to read still gets the command
        experiment = load_experiment(paths.local)
        print_summary(
            experiment, decide(experiment), paths=paths, state="interrupted", resumed=None
        )
        return
    print(f"Continue it with:  {paths.resume_command()}", flush=True)


def _close_study(paths: ExperimentPaths) -> None:
    """The study as trials.csv reads an interrupted search (searcher.close_interrupted)."""
    with contextlib.suppress(Exception):  # no study yet (stopped in Tune's start): nothing open
        close_interrupted(paths.name, paths.study_url)


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
    search: SearchContext, design: list[dict[str, Any]], metadata: dict[str, Any]
) -> tuple[list[Any], bool, dict[str, Any]]:
    options, paths = search.options, search.paths
    # The handle keeps the (non-detached) cache actor alive for the whole fit.
    cache = start_cache(
        paths.local / PROBE_CACHE_FILE,
        tune_setup.cache_namespace(paths),
        machine_dir=cache_dir(),
        fresh=options.fresh_probes,
        experiment=paths.name,
    )
    trainable = tune_setup.trainable(search)
    if options.resume and tune.Tuner.can_restore(paths.ray_path):
        tuner = tune.Tuner.restore(paths.ray_path, trainable=trainable, resume_unfinished=True)
    else:
        tuner = tune.Tuner(
            trainable,
            param_space={**search.plan.workload, "seed": options.seed},
            tune_config=tune_setup.tune_config(search, design, study_attrs(metadata)),
            run_config=tune_setup.run_config(search),
        )
    started = time.perf_counter()
    start_clock(paths.local)  # --search-time-budget-s counts from here, every run together
    try:
        results = tuner.fit()
    finally:
        stop_clock(paths.local)
    interrupted = tune_setup.tune_was_interrupted()
    fit: dict[str, Any] = {"fit_time_s": time.perf_counter() - started}
    with contextlib.suppress(Exception):  # statistics only: a dead cache actor costs this line
        fit["probe_cache"] = ray.get(cache.stats.remote(), timeout=10)
    if "probe_cache" in fit:
        print(machine_cache_line(fit["probe_cache"]), flush=True)
        budget_line = probe_budget_line(fit["probe_cache"])
        if budget_line:
            print(budget_line, flush=True)
    return ray_internals.experiment_trials(results), interrupted, fit


def _lost_cluster(search: SearchContext, what: str) -> NoReturn:
    """Ray is about to end this driver (its raylet or cluster is gone; from the watch thread):
    say so in one line, mark the experiment resumable, and exit as a runtime error."""
    print(f"error: {_lost_message(search, what)}", file=sys.stderr, flush=True)
    with contextlib.suppress(Exception):  # best effort: the files Ray wrote already resume
        stop_clock(search.paths.local)
        _mark_interrupted(search.paths)
    sys.stdout.flush()
    os._exit(EXIT_RUNTIME)


def _lost_message(search: SearchContext, what: str) -> str:
    paths = search.paths
    return (
        f"The search lost {what}; the trials that finished are saved in {paths.local}. "
        f"Continue with: {paths.resume_command(address=search.options.address)}"
    )
