"""Parameter importance per objective with Optuna's evaluators.

The stored study gives the parameters' distributions; each objective gets its own
single-objective study built from the trials table (finished trials with a finite value), so
importance is computed for throughput and accuracy alike, whatever the search optimised, and
failed trials (no value) do not distort it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from tuner.experiment import PARAM_PREFIX, STUDY_FILE, study_distributions
from tuner.units import plural

__all__ = ["param_importances"]

# fANOVA fits a random forest to the trials: from a handful of points its ranking is noise.
MIN_TRIALS = 20


def param_importances(
    study: Any, trials: pd.DataFrame, metrics: list[str]
) -> dict[str, dict[str, float] | str]:
    """metric -> {parameter: importance} (sums to 1), or a sentence saying why there is none."""
    if study is None:
        return {
            m: f"no readable Optuna study ({STUDY_FILE}) in the experiment folder" for m in metrics
        }
    found = study_distributions(study)
    return {m: _importance(found, trials, m) for m in metrics}


def _importance(dists: dict[str, Any], trials: pd.DataFrame, metric: str) -> dict[str, float] | str:
    import optuna

    ok = trials[(trials["status"] == "ok") & pd.to_numeric(trials[metric], errors="coerce").notna()]
    if len(ok) < MIN_TRIALS:
        return (
            f"not shown: {plural(len(ok), 'finished trial')}, and a ranking from fewer than "
            f"{MIN_TRIALS} is noise; run a longer search (--num-samples) to see it"
        )
    study = optuna.create_study(direction="maximize")
    for _, row in ok.iterrows():
        params = _params(row, dists)
        study.add_trial(
            optuna.trial.create_trial(
                params=params,
                distributions={k: dists[k] for k in params},
                value=float(row[metric]),
            )
        )
    evaluator = optuna.importance.FanovaImportanceEvaluator(seed=0)
    try:
        found = optuna.importance.get_param_importances(study, evaluator=evaluator)
        return {name: float(value) for name, value in found.items()}
    except (ValueError, RuntimeError) as exc:
        return f"not computable: {exc}"


def _params(row: pd.Series, distributions: dict[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name, distribution in distributions.items():
        value = row.get(PARAM_PREFIX + name)
        if pd.isna(value):  # None, NaN, or pd.NA in a nullable integer column
            continue  # a conditional parameter this trial did not sample
        if hasattr(distribution, "choices"):
            value = next((c for c in distribution.choices if str(c) == str(value)), None)
            if value is None:
                continue
        elif isinstance(value, float) and hasattr(distribution, "step") and distribution.step:
            value = type(distribution.low)(value)
        params[name] = value.item() if hasattr(value, "item") else value
    return params
