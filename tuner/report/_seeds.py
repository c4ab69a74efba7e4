"""The answer's seed lines: each pick's accuracy over its retrainings with new seeds (an interval
covering the seeds and the validation sample) and how much sooner the recommended pick reaches
a target accuracy than its plain loop (:mod:`tuner.compare.seeds`), or why there is none."""

from __future__ import annotations

import pandas as pd

from tuner.answer import Answer
from tuner.compare.seeds import plain_loop_speedup, seed_accuracy_of
from tuner.experiment import Experiment
from tuner.record import FINAL, TRIAL_ID
from tuner.stats import SEED_ACCURACY_METHOD

__all__ = ["seeds_text"]


def seeds_text(
    experiment: Experiment, answer: Answer, *, target_accuracy: float | None = None
) -> str:
    """The picks' accuracy over seeds and the pick's time-to-target speed-up over the plain
    loop, in one block ("" when the search retrained nothing and said nothing about it).
    ``target_accuracy``: the target (default: the pick's lower accuracy bound over seeds)."""
    info = experiment.metadata.get("seeds") or {}
    short = f" {info['short']}." if info.get("short") else ""
    if experiment.seeds is None or experiment.seeds.empty or answer.recommended is None:
        return f"Seeds:{short}" if short else ""
    ids = list(dict.fromkeys(str(row[TRIAL_ID]) for row in answer.best.values()))
    lines = []
    for trial_id in ids:
        accuracy = seed_accuracy_of(experiment.seeds, trial_id)
        if accuracy.seeds:
            lines.append(f"`{trial_id}`: val accuracy {accuracy.format()}")
    head = f"Retrained with new seeds ({SEED_ACCURACY_METHOD}): " + "; ".join(lines) + "."
    head += _cut_text(experiment.seeds)
    recommended = str(answer.recommended[TRIAL_ID])
    speedup = plain_loop_speedup(experiment.seeds, recommended, target_accuracy=target_accuracy)
    if speedup is None:
        return head + short
    against = f"`{recommended}` against its plain loop (every technique off, fp32, same seeds)"
    return f"{head} Time to accuracy, {against}: {speedup.text()}.{short}"


def _cut_text(seeds: pd.DataFrame) -> str:
    """The seed runs a time budget ended before their steps or epochs: their accuracy is a
    shorter run's, and on a busy machine how much shorter is the load's doing, not the seed's."""
    final = seeds[seeds[FINAL].astype(bool)]
    cut = int(final["cut"].astype(bool).sum()) if "cut" in final else 0
    if not cut:
        return ""
    return (
        f" {cut} of {len(final)} seed runs were cut by their time budget before their steps "
        "ended: their accuracy is a shorter run's, and part of the spread above is the "
        "machine's load, not the seed."
    )
