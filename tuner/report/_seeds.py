"""The answer's seed lines: each pick's accuracy over its retrainings with new seeds (an interval
covering the seeds and the validation sample) and how much sooner the recommended pick reaches
a target accuracy than its plain loop (:mod:`tuner.compare.seeds`), or why there is none."""

from __future__ import annotations

import math

import pandas as pd

from tuner.answer import Answer
from tuner.compare.seeds import plain_loop_speedup
from tuner.decision import ACCURACY_SEEDS
from tuner.experiment import Experiment
from tuner.record import FINAL, TRIAL_ID
from tuner.stats import SEED_ACCURACY_METHOD
from tuner.units import as_number, interval_text

__all__ = ["seeds_text"]


def seeds_text(experiment: Experiment, answer: Answer) -> str:
    """The picks' accuracy over seeds and the pick's time-to-target speed-up over the plain
    loop, to the answer's target, in one block ("" when the search retrained nothing and said
    nothing about it). The accuracies are the answer's (:func:`tuner.decision.decision_values`:
    the trial's own run and its retrainings that trained the whole budget)."""
    info = experiment.metadata.get("seeds") or {}
    short = f" {info['short']}." if info.get("short") else ""
    if experiment.seeds is None or experiment.seeds.empty or answer.recommended is None:
        return f"Seeds:{short}" if short else ""
    rows = {str(row[TRIAL_ID]): row for row in [answer.recommended, *answer.best.values()]}
    lines = [
        f"`{trial_id}`: val accuracy {_accuracy_text(row)}"
        for trial_id, row in rows.items()
        if as_number(row.get(ACCURACY_SEEDS)) > 1
    ]
    head = f"Retrained with new seeds ({SEED_ACCURACY_METHOD}): " + "; ".join(lines) + "."
    head += _cut_text(experiment.seeds)
    recommended = str(answer.recommended[TRIAL_ID])
    target = answer.target.accuracy if answer.target is not None else None
    if target is not None and math.isnan(target):
        target = None
    speedup = plain_loop_speedup(experiment.seeds, recommended, target_accuracy=target)
    if speedup is None:
        return head + short
    against = f"`{recommended}` against its plain loop (every technique off, fp32, same seeds)"
    return f"{head} Time to accuracy, {against}: {speedup.text()}.{short}"


def _accuracy_text(row: pd.Series) -> str:
    value, low, high = (as_number(row.get(k)) for k in _ACCURACY)
    seeds = int(as_number(row.get(ACCURACY_SEEDS)))
    interval = interval_text(low, high, lambda v: f"{v:.3f}")
    return f"{value:.3f} {interval} over {seeds} seeds (its own run and {seeds - 1} retrainings)"


_ACCURACY = ("val_accuracy", "val_accuracy_low", "val_accuracy_high")


def _cut_text(seeds: pd.DataFrame) -> str:
    """The seed runs a time budget ended before their steps or epochs: their accuracy is a
    shorter run's, and on a busy machine how much shorter is the load's doing, not the seed's."""
    final = seeds[seeds[FINAL].astype(bool)]
    cut = int(final["cut"].astype(bool).sum()) if "cut" in final else 0
    if not cut:
        return ""
    return (
        f" {cut} of {len(final)} seed runs were cut by their time budget before their steps "
        "ended: they saw fewer images than the trial, so their accuracy is left out of the "
        "interval above."
    )
