"""Warm start: an earlier experiment's finished trials, given to a new study of the same space.

``tuner search SPACE --warm-start EXPERIMENT`` reads the earlier experiment (its metadata and
Optuna study) and adds its finished trials to the new study before the first new trial is
asked for, as Optuna's ``Study.add_trials`` takes them: each trial's parameters in this space's
distributions, its objectives by name, its memory constraint where the samplers read it (as
:class:`~tuner.search.searcher.ConstrainedOptunaSearch` tells a live trial) and its user
attributes, marked with :data:`WARM_START_ATTR` (the experiment that measured it). So the
sampler starts from what is known, and the start-up design skips the rows those trials already
cover: where it is covered, the first new trial is the sampler's.

Taken: COMPLETE trials (over budget included: the sampler learns the infeasible region) and
PRUNED ones (stopped early), also those the earlier experiment had itself warm-started (they
keep their origin). Left out, and counted: trials that failed or never ended, trials this space
can no longer produce (a parameter or a value outside its distributions: the space changed),
trials without a measurement of this search's objectives, and trials that were over the earlier
memory budget but fit this one (their accuracy was never measured).

Refused, in one line: another space, or another workload (the figures would not compare).
The new trials of this search are the report's; the warm-started ones live only in its study.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.errors import TunerError
from tuner.experiment import STUDY_TRIAL_ID_ATTR, Experiment, load_experiment, memory_limit
from tuner.objectives import memory_violation, objective_directions, objective_metrics
from tuner.record import MEMORY_VIOLATION
from tuner.search.experiment import ExperimentPaths, SearchContext
from tuner.search.options import SearchOptions
from tuner.search.plan import SearchPlan, SpaceProfile
from tuner.search.searcher import constraint_arguments, measured_violation

__all__ = ["WARM_START_ATTR", "WarmStart", "load_warm_start", "read_warm_start", "warm_start"]

WARM_START_ATTR = "warm_start_from"  # user attribute: the experiment that measured the trial
_TAKEN = (TrialState.COMPLETE, TrialState.PRUNED)


@dataclass(frozen=True)
class WarmStart:
    """The earlier trials a new study starts with."""

    source: str  # the earlier experiment's name
    path: Path
    trials: list[FrozenTrial]  # ready for Study.add_trials
    left_out: dict[str, int] = field(default_factory=dict)  # why -> how many

    def uncovered(self, design: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The start-up design's rows that no warm-started trial covers (a row's parameter a
        trial does not have is conditional and does not apply to it)."""
        return [dict(row) for row in design if not any(_covers(t, row) for t in self.trials)]

    def origins(self) -> dict[str, int]:
        """Experiment -> how many of the trials it measured."""
        return dict(Counter(str(t.user_attrs[WARM_START_ATTR]) for t in self.trials))

    def summary(self) -> str:
        """One line for the console and the report."""
        origins = ", ".join(f"{n} from {name}" for name, n in self.origins().items()) or "none"
        left = "; ".join(f"{n} left out: {why}" for why, n in self.left_out.items())
        return f"warm start: {len(self.trials)} earlier trials ({origins})" + (
            f"; {left}" if left else ""
        )

    def metadata(self, design_skipped: int) -> dict[str, Any]:
        return {
            "experiment": self.source,
            "path": str(self.path),
            "trials": len(self.trials),
            "from": self.origins(),
            "left_out": dict(self.left_out),
            "design_rows_covered": design_skipped,
            "summary": self.summary(),
        }

    def add_to_study(self, storage_url: str, study_name: str, directions: Sequence[str]) -> None:
        """Create the new study with these trials (before the searcher loads it)."""
        study = optuna.create_study(
            storage=storage_url,
            study_name=study_name,
            directions=["minimize" if d == "min" else "maximize" for d in directions],
            load_if_exists=True,
        )
        study.add_trials(self.trials)


def warm_start(
    search: SearchContext,
    profile: SpaceProfile,
    *,
    design: Sequence[Mapping[str, Any]],
    earlier: Experiment | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """With ``--warm-start``: create the new study with the earlier trials and return the design
    rows left to run and what to record in the metadata; without it, the design and ``None``.
    ``earlier``: the experiment :func:`read_warm_start` read before Ray started.

    Raises:
        TunerError: as :func:`load_warm_start`, before anything is written.
    """
    options, paths = search.options, search.paths
    warm = load_warm_start(
        options, search.plan, profile, space_name=search.space.name, earlier=earlier
    )
    if warm is None:
        return [dict(row) for row in design], None
    left = warm.uncovered(design)
    paths.local.mkdir(parents=True, exist_ok=True)
    warm.add_to_study(paths.study_url, paths.name, objective_directions(options.objective))
    metadata = warm.metadata(design_skipped=len(design) - len(left))
    if options.sampler == "grid":  # measured: Optuna 5's GridSampler re-ran both added points
        metadata["summary"] += (
            "; --sampler grid still runs its whole grid (Optuna's GridSampler does not count "
            "trials added to the study): the warm-started points run again"
        )
    return left, metadata


def read_warm_start(
    options: SearchOptions, *, space_name: str, workload: Mapping[str, Any] | None = None
) -> Experiment | None:
    """The experiment ``--warm-start`` names, checked against this search's space (and
    ``workload``, when already known): what a new search checks before Ray starts.

    Raises:
        TunerError: no such experiment, another space or workload, or no readable study.
    """
    if not options.warm_start:
        return None
    earlier = _read(options.warm_start, options.storage)
    _check_same_space(options.warm_start, earlier, space_name)
    if workload is not None:
        _check_same_workload(options.warm_start, earlier, workload)
    return earlier


def load_warm_start(
    options: SearchOptions,
    plan: SearchPlan,
    profile: SpaceProfile,
    *,
    space_name: str,
    earlier: Experiment | None = None,
) -> WarmStart | None:
    """The trials ``--warm-start`` names, re-expressed for this search (``None`` without it);
    ``earlier``: that experiment, already read (:func:`read_warm_start`).

    Raises:
        TunerError: no such experiment, another space or workload, or no readable study.
    """
    if not options.warm_start:
        return None
    if earlier is None:
        earlier = read_warm_start(options, space_name=space_name)
    _check_same_workload(options.warm_start, earlier, plan.workload)
    metrics = objective_metrics(options.objective)
    names = _metric_names(earlier)
    budget_changed = memory_limit(earlier.metadata) != options.max_memory_bytes
    trials: list[FrozenTrial] = []
    left_out: Counter[str] = Counter()
    for trial in earlier.study.get_trials(deepcopy=False):
        taken = _retell(
            trial,
            earlier.name,
            profile,
            metrics,
            names,
            budget=options.max_memory_bytes,
            budget_changed=budget_changed,
        )
        if isinstance(taken, str):
            left_out[taken] += 1
        else:
            trials.append(taken)
    return WarmStart(earlier.name, earlier.path, trials, dict(left_out))


def _read(reference: str, storage: str) -> Experiment:
    folder = Path(reference)
    if not folder.is_dir():
        folder = ExperimentPaths.of(storage, reference).local
    try:
        earlier = load_experiment(folder)
    except TunerError as exc:  # the flag named, so the user knows which path was wrong
        raise TunerError(f"--warm-start {reference}: {exc}") from None
    if earlier.study is None:
        raise TunerError(
            f"--warm-start {reference}: its study.db could not be read; warm-start from another "
            "experiment or leave the flag out."
        )
    return earlier


def _check_same_space(reference: str, earlier: Experiment, space_name: str) -> None:
    old_space = earlier.metadata.get("space")
    if old_space != space_name:
        raise TunerError(
            f"--warm-start {reference}: that experiment searched space {old_space!r}, this "
            f"search {space_name!r}; warm-start from an experiment of {space_name!r}."
        )


def _check_same_workload(reference: str, earlier: Experiment, workload: Mapping[str, Any]) -> None:
    old = earlier.metadata.get("workload") or {}
    differ = sorted(k for k in {*old, *workload} if _json(old.get(k)) != _json(workload.get(k)))
    if differ:
        shown = ", ".join(f"{k} {old.get(k)!r} -> {workload.get(k)!r}" for k in differ[:4])
        raise TunerError(
            f"--warm-start {reference}: its workload differs ({shown}), so its figures do not "
            "compare; search the same workload (--workload, --set) or leave --warm-start out."
        )


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)  # a saved tuple reads as a list


def _metric_names(earlier: Experiment) -> list[str]:
    """The names of the earlier study's objective values, in order."""
    names = earlier.study.metric_names
    if names:
        return list(names)
    return [str(o["metric"]) for o in earlier.metadata.get("objectives") or []]


def _retell(
    trial: FrozenTrial,
    source: str,
    profile: SpaceProfile,
    metrics: Sequence[str],
    names: Sequence[str],
    *,
    budget: int | None,
    budget_changed: bool,
) -> FrozenTrial | str:
    """The trial as this study takes it, or why it is left out."""
    if trial.state not in _TAKEN:
        return "failed or unfinished"
    if any(name not in profile.distributions for name in trial.params):
        return "outside the current space"
    values = None
    if trial.state == TrialState.COMPLETE:
        values = _values(trial, metrics, names)
        if values is None:
            return "objective not measured"
    attrs = {k: v for k, v in trial.user_attrs.items() if k != STUDY_TRIAL_ID_ATTR}
    attrs[WARM_START_ATTR] = trial.user_attrs.get(WARM_START_ATTR) or source
    attrs.setdefault("warm_start_trial", f"{source}#{trial.number}")
    violation = measured_violation(trial)
    if violation is not None and budget_changed:
        again = memory_violation(trial.user_attrs, max_memory_bytes=budget)
        if violation > 0 >= again:
            return "over the earlier memory budget, never measured under this one"
        violation = attrs[MEMORY_VIOLATION] = again
    try:
        return optuna.trial.create_trial(
            state=trial.state,
            values=values,
            params=dict(trial.params),
            distributions={name: profile.distributions[name] for name in trial.params},
            user_attrs=attrs,
            intermediate_values=dict(trial.intermediate_values),
            **(constraint_arguments(violation) if violation is not None else {}),
        )
    except ValueError:  # a value the space's distribution no longer holds
        return "outside the current space"


def _values(trial: FrozenTrial, metrics: Sequence[str], names: Sequence[str]) -> list[float] | None:
    """This search's objectives, by name: the earlier study's values, else its user attributes
    (a single-objective study recorded the other measurement there)."""
    told = dict(zip(names, trial.values or [], strict=False))
    values = [told.get(metric, trial.user_attrs.get(metric)) for metric in metrics]
    if any(v is None for v in values):
        return None
    return [float(v) for v in values]


def _covers(trial: FrozenTrial, row: Mapping[str, Any]) -> bool:
    shared = [k for k in row if k in trial.params]
    return bool(shared) and all(trial.params[k] == row[k] for k in shared)
