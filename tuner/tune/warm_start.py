"""``--warm-start``: an earlier experiment's finished trials given to a new study of the same
space and workload through Optuna's ``Study.add_trials`` (marked with :data:`WARM_START_ATTR`);
the start-up design skips the rows they cover. They live only in the study, never in the report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.experiment import STUDY_TRIAL_ID_ATTR, Experiment, memory_limit
from tuner.experiment.earlier import check_same_workload, read_warm_start
from tuner.experiment.options import SearchOptions
from tuner.objectives import memory_violation, objective_directions, objective_metrics
from tuner.record import MEMORY_VIOLATION
from tuner.tune.context import SearchContext
from tuner.tune.plan import SearchPlan, SpaceProfile
from tuner.tune.searcher import constraint_arguments, measured_violation

__all__ = ["WARM_START_ATTR", "WarmStart", "load_warm_start", "warm_start"]

WARM_START_ATTR = "warm_start_from"  # user attribute: the experiment that measured the trial


@dataclass(frozen=True)
class WarmStart:
    source: str  # the earlier experiment's name
    path: Path
    trials: list[FrozenTrial]  # ready for Study.add_trials
    left_out: dict[str, int] = field(default_factory=dict)  # why -> how many

    def uncovered(self, design: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return [dict(row) for row in design if not any(_covers(t, row) for t in self.trials)]

    def origins(self) -> dict[str, int]:
        return dict(Counter(str(t.user_attrs[WARM_START_ATTR]) for t in self.trials))

    def summary(self, *, grid: bool = False) -> str:
        """Its trials in words, the report's (``grid``: --sampler grid runs them again)."""
        from tuner.report._status_words import warm_start_text  # the report's words

        words = {"trials": len(self.trials), "from": self.origins(), "left_out": self.left_out}
        return warm_start_text({**words, "grid": grid})

    def metadata(self, design_skipped: int, *, grid: bool = False) -> dict[str, Any]:
        return {
            "experiment": self.source,
            "path": str(self.path),
            "trials": len(self.trials),
            "from": self.origins(),
            "left_out": dict(self.left_out),
            "grid": grid,
            "design_rows_covered": design_skipped,
            "summary": self.summary(grid=grid),
        }


def warm_start(
    search: SearchContext,
    profile: SpaceProfile,
    *,
    design: Sequence[Mapping[str, Any]],
    earlier: Experiment | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """With ``--warm-start``: the new study made with the earlier trials; the design rows left
    to run and the metadata's record (without it, the design and ``None``).

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
    directions = objective_directions(options.objective)
    paths.local.mkdir(parents=True, exist_ok=True)
    study = optuna.create_study(
        storage=paths.study_url,
        study_name=paths.name,
        directions=["minimize" if d == "min" else "maximize" for d in directions],
        load_if_exists=True,
    )
    study.add_trials(warm.trials)  # before the searcher loads the study
    # measured: Optuna 5's GridSampler re-ran both added points (the summary says so)
    metadata = warm.metadata(len(design) - len(left), grid=options.sampler == "grid")
    return left, metadata


def load_warm_start(
    options: SearchOptions,
    plan: SearchPlan,
    profile: SpaceProfile,
    *,
    space_name: str,
    earlier: Experiment | None = None,
) -> WarmStart | None:
    """The trials ``--warm-start`` names, re-expressed for this search (``None`` without it).

    Raises:
        TunerError: no such experiment, another space or workload, or no readable study.
    """
    if not options.warm_start:
        return None
    if earlier is None:
        earlier = read_warm_start(options, space_name=space_name)
    check_same_workload(options.warm_start, earlier, plan.workload)
    metrics = objective_metrics(options.objective)
    names = list(earlier.study.metric_names or []) or [  # the earlier objectives, in order
        str(o["metric"]) for o in earlier.metadata.get("objectives") or []
    ]
    trials: list[FrozenTrial] = []
    left_out: Counter[str] = Counter()
    for trial in earlier.study.get_trials(deepcopy=False):
        taken = _retell(trial, earlier, profile, metrics, names, options.max_memory_bytes)
        if isinstance(taken, str):
            left_out[taken] += 1
        else:
            trials.append(taken)
    return WarmStart(earlier.name, earlier.path, trials, dict(left_out))


def _retell(
    trial: FrozenTrial,
    earlier: Experiment,
    profile: SpaceProfile,
    metrics: Sequence[str],
    names: Sequence[str],
    budget: int | None,
) -> FrozenTrial | str:
    # PRUNED: stopped early or over budget, as in the study they came from; COMPLETE: ok (an
    # older study's over-budget trials too: told PRUNED below, as the record tells them now).
    if trial.state not in (TrialState.COMPLETE, TrialState.PRUNED):
        return "failed or unfinished"
    if any(name not in profile.distributions for name in trial.params):
        return "outside the current space"
    values = None
    if trial.state == TrialState.COMPLETE:
        values = _values(trial, metrics, names)
        if values is None:
            return "objective not measured"
    attrs = {k: v for k, v in trial.user_attrs.items() if k != STUDY_TRIAL_ID_ATTR}
    attrs[WARM_START_ATTR] = trial.user_attrs.get(WARM_START_ATTR) or earlier.name
    attrs.setdefault("warm_start_trial", f"{earlier.name}#{trial.number}")
    violation = measured_violation(trial)
    if violation is not None and memory_limit(earlier.metadata) != budget:
        again = memory_violation(trial.user_attrs, max_memory_bytes=budget)
        if violation > 0 >= again:
            return "over the earlier memory budget, never measured under this one"
        violation = attrs[MEMORY_VIOLATION] = again
    state = trial.state
    if violation is not None and violation > 0:  # over budget: no values (record.optuna_state)
        state, values = TrialState.PRUNED, None
    try:
        return optuna.trial.create_trial(
            state=state,
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
    """This search's objectives by name: the values, else the user attributes (a
    single-objective study recorded the other measurement there)."""
    told = dict(zip(names, trial.values or [], strict=False))
    values = [told.get(metric, trial.user_attrs.get(metric)) for metric in metrics]
    if any(v is None for v in values):
        return None
    return [float(v) for v in values]


def _covers(trial: FrozenTrial, row: Mapping[str, Any]) -> bool:
    shared = [k for k in row if k in trial.params]
    return bool(shared) and all(trial.params[k] == row[k] for k in shared)
