"""The auditor's ``target`` check: every trial's time to target in trials.csv against what the
trial's own accuracy curve and the answer give (:mod:`tuner.time_to_target`): the target, the
images at the crossing and before it, the stopwatch's seconds there, and the estimate."""

from __future__ import annotations

import math

import pandas as pd

from tuner.answer import decide
from tuner.experiment import STUDY_TIME_TO_TARGET_ATTR, Experiment
from tuner.record import TARGET_ACCURACY, TIME_TO_TARGET_SOURCE, TRIAL_ID
from tuner.report._audit_text import Finding
from tuner.time_to_target import TARGET_COLUMNS
from tuner.units import as_number

__all__ = ["check_time_to_target"]

_TOLERANCE = 1e-6  # relative: trials.csv writes floats in full, a round trip keeps them


def check_time_to_target(experiment: Experiment, table: pd.DataFrame, where: str) -> list[Finding]:
    """Each trial's :data:`TARGET_COLUMNS` in ``table`` (trials.csv) and in the study's user
    attribute against the answer decided again from the experiment folder (its curves and
    re-measurements)."""
    if TARGET_ACCURACY not in table:
        return []  # a report from before time to target: nothing claimed
    truth = decide(experiment).trials
    expected = truth.set_index(truth[TRIAL_ID].astype(str))
    rows = {str(row[TRIAL_ID]): row.to_dict() for _, row in table.iterrows()}
    found = _compare(rows, expected, where)
    told = _study_figures(experiment)
    if told is not None:
        found += _compare(told, expected, "the Optuna study's user attribute")
    return found


def _study_figures(experiment: Experiment) -> dict[str, dict[str, object]] | None:
    """What the study was told (None: a study without the attribute, or none)."""
    study = experiment.study
    attrs = getattr(study, "user_attrs", None) or {}
    record = attrs.get(STUDY_TIME_TO_TARGET_ATTR)
    trials = record.get("trials") if isinstance(record, dict) else None
    return trials if isinstance(trials, dict) else None


def _compare(
    rows: dict[str, dict[str, object]], expected: pd.DataFrame, where: str
) -> list[Finding]:
    found: list[Finding] = []
    for trial_id, row in rows.items():
        if trial_id not in expected.index:
            continue
        for column in TARGET_COLUMNS:
            stated, true = row.get(column), expected.loc[trial_id].get(column)
            if not _same(stated, true, text=column == TIME_TO_TARGET_SOURCE):
                claim = f"{trial_id} {column}={stated}"
                why = f"its curve and the answer give {true}"
                found.append(Finding("target", where, claim, why))
    return found


def _same(stated: object, true: object, *, text: bool) -> bool:
    if text:
        return _text(stated) == _text(true)
    a, b = as_number(stated), as_number(true)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=_TOLERANCE, abs_tol=1e-12)


def _text(value: object) -> str:
    return "" if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)
