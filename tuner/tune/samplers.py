"""Optuna samplers by name (:data:`tuner.experiment.options.SAMPLERS`), seeded, each learning
the memory constraint where it can.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tuner.errors import TunerError
from tuner.experiment.options import SAMPLERS
from tuner.objectives import told_violation
from tuner.record import MEMORY_VIOLATION

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

__all__ = ["check_sampler", "make_sampler", "sets_constraints"]


def sets_constraints() -> bool:
    """Whether Optuna's samplers read the constraints set on a trial (``Trial.set_constraint``,
    Optuna >= 5); older ones get the same value through ``constraints_func``."""
    import optuna

    return hasattr(optuna.trial.Trial, "set_constraint")


def _memory_constraint(trial: FrozenTrial) -> Sequence[float]:
    """Optuna < 5's ``constraints_func``: the measured memory violation; a trial that crashed
    before measuring counts as feasible, so that it does not bias the model."""
    return (told_violation(trial.user_attrs.get(MEMORY_VIOLATION)),)


def check_sampler(name: str, grid: Mapping[str, Sequence[Any]] | None) -> None:
    """Refuse a sampler the space cannot drive.

    Raises:
        TunerError: ``grid`` was asked for a space that declares no ``GRID``.
    """
    if name == "grid" and not grid:
        raise TunerError(
            "--sampler grid needs a space that declares GRID (e.g. tiny_grid_space); "
            "use --sampler tpe or random for this space."
        )


def make_sampler(
    name: str,
    *,
    seed: int,
    budget: int | None,
    concurrency: int,
    grid: Mapping[str, Sequence[Any]] | None,
) -> optuna.samplers.BaseSampler:
    """A seeded sampler; ``budget`` (trials, if known) sizes the random start-up phase.

    Raises:
        TunerError: ``grid`` was asked for a space that declares no ``GRID``.
    """
    import optuna

    startup = 10 if budget is None else max(2, min(10, budget // 3))
    constraints = None if sets_constraints() else _memory_constraint
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    if name == "tpe":
        return optuna.samplers.TPESampler(
            seed=seed,
            n_startup_trials=startup,
            multivariate=True,
            group=True,  # conditional parameters (gn_groups) get their own groups
            constant_liar=concurrency > 1,
            constraints_func=constraints,
        )
    if name == "gp":
        return optuna.samplers.GPSampler(
            seed=seed, n_startup_trials=startup, constraints_func=constraints
        )
    if name == "nsga2":
        population = 50 if budget is None else max(4, min(50, budget // 3))
        return optuna.samplers.NSGAIISampler(
            seed=seed, population_size=population, constraints_func=constraints
        )
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "grid":
        check_sampler(name, grid)
        return optuna.samplers.GridSampler(dict(grid or {}), seed=seed)
    raise TunerError(f"Unknown sampler {name!r}; use one of {', '.join(SAMPLERS)}.")
