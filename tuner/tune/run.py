"""A search's steps on Ray, in the order :class:`tuner.tune.driver.SearchDriver` calls them:
:func:`connect`, :func:`plan_search`, :func:`begin`, :func:`run_trials` (Tune's fit), then
:class:`AfterTrials`. The driver owns the start and stop around them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sys
import time
from typing import Any, NoReturn

import pandas as pd
import ray
from ray import tune

from tuner.answer import Answer, decide
from tuner.errors import EXIT_RUNTIME, TunerRuntimeError, error_line
from tuner.experiment import (
    PROBE_CACHE_FILE,
    STUDY_FILE,
    Experiment,
    load_experiment,
    read_metadata,
    update_metadata,
    write_metadata,
)
from tuner.experiment.limits import NUM_SAMPLES, TIME_BUDGET, settle_clock, start_clock, stop_clock
from tuner.experiment.lock import child_pids
from tuner.experiment.options import SearchOptions, options_record
from tuner.experiment.paths import ExperimentPaths
from tuner.record import ENDED_AT, KIND, REPORTED_UNIX_S, TRIAL_ID
from tuner.spaces import SearchSpace
from tuner.speed.cache import machine_cache_line, probe_budget_line
from tuner.tune import _ray_internals as ray_internals
from tuner.tune import cluster, tune_setup
from tuner.tune.after_search import effects_around, remeasure_candidates, seeds_around
from tuner.tune.context import SearchContext, now, start_metadata, study_attrs
from tuner.tune.design import startup_design
from tuner.tune.plan import SpaceProfile, make_plan
from tuner.tune.preflight import Checked, Prepared, profile_for
from tuner.tune.searcher import close_interrupted, close_orphans, requeue_not_run
from tuner.tune.tracking import cut_results
from tuner.tune.trials_actor import start_actor
from tuner.tune.warm_start import warm_start
from tuner.usercache import cache_dir

__all__ = [
    "AfterTrials",
    "Trials",
    "begin",
    "close_study",
    "connect",
    "mark_interrupted",
    "plan_search",
    "resumed",
    "run_trials",
]


@dataclasses.dataclass(frozen=True)
class Trials:
    trial_ids: list[str]  # Ray's id of each trial the fit ran
    finished: bool  # every trial ended, and no Ctrl-C stopped the fit
    fit: dict[str, Any]  # the metadata's record of the fit (its time, the probe cache's)
    orphans: list[int]  # the study's trials no Ray trial reported, closed


def connect(prepared: Prepared) -> tuple[cluster.ClusterInfo, set[int]]:
    """Ray, started or joined, and the processes this driver had started before it (those after
    it are the search's)."""
    options, space = prepared.options, prepared.space
    tune_setup.quiet_ray(verbose=options.verbose)
    existing = child_pids()
    info = cluster.connect(address=options.address, runtime_env=_user_code_env(options, space))
    return info, existing


def plan_search(
    prepared: Prepared, info: cluster.ClusterInfo
) -> tuple[SearchContext, SpaceProfile | None]:
    options, space = prepared.options, prepared.space
    plan = make_plan(options, space, node_cpus=cluster.node_cpus(), total_gpus=info.total_gpus)
    search = SearchContext(options, space, plan, prepared.paths)
    return search, profile_for(space, plan, prepared.checked)


def _user_code_env(options: SearchOptions, space: SearchSpace) -> dict[str, Any] | None:
    workloads = [*space.workloads.values(), options.overrides]
    return cluster.user_code_env(
        str(w[key]) for w in workloads for key in ("model", "data") if key in w
    )


def run_trials(
    search: SearchContext, design: list[dict[str, Any]], metadata: dict[str, Any]
) -> Trials:
    """Tune's fit; the study closed as trials.csv reads it after a Ctrl-C, its orphans after a
    finished fit.

    Raises:
        TunerRuntimeError: Ray's own processes failed under the driver.
    """
    paths = search.paths
    try:
        with cluster.watch(on_lost=lambda what: _lost_cluster(search, what)):
            trials, interrupted, fit = _fit(search, design, metadata)
    except ray.exceptions.RayError as exc:
        what = f"Ray ({error_line(exc, limit=200)})"
        raise TunerRuntimeError(_lost_message(search, what)) from exc
    trial_ids = [str(t.trial_id) for t in trials]
    finished = not interrupted and all(t.is_finished() for t in trials)
    if interrupted:
        close_study(paths)
    cut = cut_results(trials)  # the trials its time budget stopped half-way: incomplete
    orphans = close_orphans(paths.name, paths.study_url, set(trial_ids), cut) if finished else []
    return Trials(trial_ids, finished, fit, orphans)


def begin(
    search: SearchContext,
    info: cluster.ClusterInfo,
    profile: SpaceProfile | None,
    checked: Checked | None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The metadata the search runs under (written), and a new search's start-up design."""
    design: list[dict[str, Any]] = []
    if profile is None:
        metadata = _resume_metadata(search)
    else:
        design = startup_design(profile, budget=search.plan.sample_budget, seed=search.options.seed)
        earlier = checked.earlier if checked else None
        design, warm = warm_start(search, profile, design=design, earlier=earlier)
        metadata = {
            **start_metadata(search, info, profile, design),
            **({"warm_start": warm} if warm else {}),
        }
        write_metadata(search.paths.local, metadata)
    return metadata, design


def _resume_metadata(search: SearchContext) -> dict[str, Any]:
    """A resumed search marked running, with its options and limits; when a limit moved, the
    start-up design's trials an earlier end closed as not run are queued again."""
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


@dataclasses.dataclass
class AfterTrials:
    """Re-measurement, seed retraining and the technique effects within ``trust_s`` seconds
    together (``alone``: each measures one process), the answer, and the metadata's record. A
    step an earlier run finished on the same trials is kept; a Ctrl-C keeps what finished."""

    search: SearchContext
    alone: bool
    trust_s: float | None
    experiment: Experiment
    kept: set[str]  # the steps an earlier run finished on these trials
    trials: str  # the digest of the ended trials
    done: list[str]
    answer: Answer | None = None
    step: str = "re-measurement"  # the step under way
    record: dict[str, Any] = dataclasses.field(
        default_factory=lambda: {"interrupted_during": None}  # a resumed run clears an old one
    )

    @classmethod
    def of(
        cls, search: SearchContext, alone: bool, trust_s: float | None, metadata: dict[str, Any]
    ) -> AfterTrials:
        experiment = load_experiment(search.paths.local)
        trials = _ended_trials(experiment)
        kept = _kept_steps(metadata, trials)
        done = [step for step in _AFTER_STEPS if step in kept]
        return cls(search, alone, trust_s, experiment, kept, trials, done)

    def run(self) -> None:
        search, trust_s, started = self.search, self.trust_s, time.perf_counter()
        share = _REMEASURE_SHARE if search.options.effects_repeats else 1.0
        remeasure_s = None if trust_s is None else trust_s * share
        if self._runs(_AFTER_STEPS[0]):
            failures, info = remeasure_candidates(search, self.experiment, remeasure_s)
            self.record["remeasure_failures"] = failures
            if info is not None:
                self.record["remeasure"] = info
                self.experiment = load_experiment(search.paths.local)  # with the re-measurements
            self._finished()  # before the next step: a kill keeps it
        self.answer = decide(self.experiment)
        if self._runs(_AFTER_STEPS[1]):
            left = _time_left(trust_s, started, keep=_EFFECTS_SHARE)
            self.record.update(seeds_around(search, self.experiment, self.answer, left))
            self.experiment = self.experiment.with_seeds()  # the seeds' runs, read
            self.answer = decide(self.experiment)
            self._finished()
        if self._runs(_AFTER_STEPS[2]):
            left = _time_left(trust_s, started)
            self.record.update(effects_around(search, self.experiment, self.answer, left))

    def stopped(self) -> None:
        self.record["interrupted_during"] = self.step
        if self.step in self.done and self.step not in self.kept:  # begun here, not skipped
            self.done.remove(self.step)

    def result(self) -> tuple[Experiment, Answer, dict[str, Any]]:
        self.record[_FINISHED_AFTER_TRIALS] = {"steps": self.done, "trials": self.trials}
        answer = decide(self.experiment) if self.answer is None else self.answer
        return self.experiment, answer, self.record

    def _runs(self, step: str) -> bool:
        """Whether ``step`` runs now (counted as done from here: Ctrl-C takes it back)."""
        self.step = step
        if not self.alone:
            return False
        if step in self.kept:
            print(f"The {step} finished in an earlier run on these trials: kept.", flush=True)
            return False
        self.done.append(step)
        return True

    def _finished(self) -> None:
        """Record a step as it ends: a kill -9 during the next, then ``--resume``, keeps it."""
        finished = {k: v for k, v in self.record.items() if k != "interrupted_during"}
        finished[_FINISHED_AFTER_TRIALS] = {"steps": list(self.done), "trials": self.trials}
        update_metadata(self.search.paths.local, **finished)


_AFTER_STEPS = ("re-measurement", "seed retraining", "technique effects")  # in their order
# The metadata's record of which of them finished, and on which ended trials.
_FINISHED_AFTER_TRIALS = "finished_after_trials"


def _kept_steps(metadata: dict[str, Any], trials: str) -> set[str]:
    """The steps an earlier run finished on the same ended trials: a resume must not replace a
    finished measurement with a shorter one."""
    record = metadata.get(_FINISHED_AFTER_TRIALS) or {}
    return set(record.get("steps", ())) if record.get("trials") == trials else set()


def _ended_trials(experiment: Experiment) -> str:
    ended = experiment.trials[experiment.trials[KIND] != "incomplete"]
    pairs = sorted(zip(ended[TRIAL_ID].astype(str), ended[KIND].astype(str), strict=True))
    return hashlib.sha256(json.dumps(pairs).encode()).hexdigest()[:16]


_REMEASURE_SHARE = 0.25  # of the trust budget: the effects have 8 arms to the re-measurement's 3
# Of the trust budget, what the seed retraining leaves the effects: the seeds' runs are whole
# trainings (each pick and the plain loop, 3 seeds), the effects' rounds short windows.
_EFFECTS_SHARE = 0.25


def _time_left(trust_s: float | None, started: float, keep: float = 0.0) -> float | None:
    if trust_s is None:
        return None
    return max(0.0, trust_s * (1.0 - keep) - time.perf_counter() + started)


def close_study(paths: ExperimentPaths) -> None:
    with contextlib.suppress(Exception):  # no study yet (stopped in Tune's start): nothing open
        close_interrupted(paths.name, paths.study_url)


def mark_interrupted(paths: ExperimentPaths) -> None:
    update_metadata(paths.local, state="interrupted", **{ENDED_AT: now()})
    paths.upload()


def resumed(experiment: Experiment, started: float, orphans: list[int]) -> dict[str, Any]:
    trials = experiment.trials
    ended = trials[KIND] != "incomplete"
    reported = trials.get(REPORTED_UNIX_S, pd.Series(float("nan"), index=trials.index))
    before = ended & (reported.astype(float) < started)  # NaN: never reported, not before
    return {"before": int(before.sum()), "after": int((ended & ~before).sum()), "orphans": orphans}


def _fit(
    search: SearchContext, design: list[dict[str, Any]], metadata: dict[str, Any]
) -> tuple[list[Any], bool, dict[str, Any]]:
    options, paths = search.options, search.paths
    # The handle keeps the (non-detached) trials' actor alive for the whole fit.
    actor = start_actor(
        paths.local / PROBE_CACHE_FILE,
        tune_setup.actor_namespace(paths),
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
        results, interrupted = ray_internals.fit_keeping_handlers(tuner.fit)
    finally:
        stop_clock(paths.local)
    fit: dict[str, Any] = {"fit_time_s": time.perf_counter() - started}
    with contextlib.suppress(Exception):  # statistics only: a dead trials' actor costs this line
        fit["probe_cache"] = ray.get(actor.stats.remote(), timeout=10)
    if "probe_cache" in fit:
        print(machine_cache_line(fit["probe_cache"]), flush=True)
        budget_line = probe_budget_line(fit["probe_cache"])
        if budget_line:
            print(budget_line, flush=True)
    return ray_internals.experiment_trials(results), interrupted, fit


def _lost_cluster(search: SearchContext, what: str) -> NoReturn:
    """Ray is about to end this driver (from the watch thread): say so, mark it resumable, exit."""
    print(f"error: {_lost_message(search, what)}", file=sys.stderr, flush=True)
    with contextlib.suppress(Exception):  # best effort: the files Ray wrote already resume
        stop_clock(search.paths.local)
        mark_interrupted(search.paths)
    sys.stdout.flush()
    os._exit(EXIT_RUNTIME)


def _lost_message(search: SearchContext, what: str) -> str:
    paths = search.paths
    return (
        f"The search lost {what}; the trials that finished are saved in {paths.local}. "
        f"Continue with: {paths.resume_command(address=search.options.address)}"
    )
