"""The auditor's ``target`` check: every trial's time to target in trials.csv against what the
trial's own accuracy curve and the answer give (:mod:`tuner.time_to_target`): the target, the
images at the crossing and before it, the stopwatch's seconds there, and the estimate."""

from __future__ import annotations

import math

import pandas as pd

from tuner.answer import decide
from tuner.experiment import Experiment
from tuner.record import TARGET_ACCURACY, TIME_TO_TARGET_SOURCE, TRIAL_ID
from tuner.report._audit_text import Finding
from tuner.time_to_target import TARGET_COLUMNS
from tuner.units import as_number

__all__ = ["check_time_to_target"]

_TOLERANCE = 1e-6  # relative: trials.csv writes floats in full, a round trip keeps them


def check_time_to_target(experiment: Experiment, table: pd.DataFrame, where: str) -> list[Finding]:
    """Each trial's :data:`TARGET_COLUMNS` in ``table`` (trials.csv) against the answer
    decided again from the experiment folder (its curves and re-measurements)."""
    if TARGET_ACCURACY not in table:
        return []  # a report from before time to target: nothing claimed
    truth = decide(experiment).trials
    expected = truth.set_index(truth[TRIAL_ID].astype(str))
    found: list[Finding] = []
    for _, row in table.iterrows():
        trial_id = str(row[TRIAL_ID])
        if trial_id not in expected.index:
            continue
        for column in TARGET_COLUMNS:
            stated, true = row.get(column), expected.loc[trial_id].get(column)
            if not _same(stated, true, text=column == TIME_TO_TARGET_SOURCE):
                found.append(
                    Finding(
                        "target",
                        where,
                        f"{trial_id} {column}={stated}",
                        f"its curve and the answer give {true}",
                    )
                )
    return found


def _same(stated: object, true: object, *, text: bool) -> bool:
    if text:
        return (str(stated) if pd.notna(stated) else "") == (str(true) if pd.notna(true) else "")
    a, b = as_number(stated), as_number(true)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=_TOLERANCE, abs_tol=1e-12)
