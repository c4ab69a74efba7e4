"""The batch-size answer: from the trials, the images and seconds to the target against batch
size. Does a larger batch reach the target sooner on this hardware, and from which size on does
it stop paying (the critical batch size of Shallue et al. 2018 and McCandlish et al. 2018:
beyond it, more images per step no longer cut the steps to the target in proportion)?

Each batch size is represented by its soonest trial; two adjacent sizes are compared by the
one rule (:attr:`tuner.stats.Change.verdict`) on their time ratio
(:func:`tuner.time_to_target.time_ratio`): a tie is a tie, an interval that says nothing says
nothing, and too few sizes that reached the target is said as such.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from tuner.answer import Answer
from tuner.decision import throughput_ratio
from tuner.experiment import PARAM_PREFIX, Experiment
from tuner.record import (
    IMAGES_TO_TARGET,
    IMAGES_TO_TARGET_LOW,
    KIND,
    TIME_TO_TARGET_EST_HIGH,
    TIME_TO_TARGET_EST_LOW,
    TIME_TO_TARGET_EST_S,
    TRIAL_ID,
)
from tuner.report._batch_words import ANSWER, PAIR, TIME_RATIO, pays
from tuner.report.claims import Claim, Claims, Measure
from tuner.report.document import Image, Section
from tuner.stats import Change
from tuner.time_to_target import seconds_text, time_ratio
from tuner.units import plural

__all__ = ["batch_claims", "batch_section", "larger_sooner"]

BATCH = f"{PARAM_PREFIX}batch_size"
_MEASURED = ("ok", "stopped early", "starved")  # kinds whose curve is a real run's, to its end


def batch_section(
    experiment: Experiment, answer: Answer, out: Path | None, claims: Claims
) -> Section | None:
    """Section "Batch size and time to target", or None without a batch size or a target; its
    verdicts are the ``batch_pair`` and ``batch_answer`` claims (``out`` None: no plot drawn)."""
    found = _sizes(answer)
    if found is None:
        return None
    sized, soonest = found
    blocks: list[Any] = [_per_size(sized, soonest), _verdict(soonest, experiment.remeasure, claims)]
    reached = sized.dropna(subset=[TIME_TO_TARGET_EST_S])
    if out is not None and not reached.empty:
        blocks.append(_plot(reached, out / "batch_size.png"))
    return Section("Batch size and time to target", blocks, anchor="batch-size")


def _sizes(answer: Answer) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """The trials with a batch size whose curve ran to its end, and each size's representative
    (in size order), or None without a batch size searched or a target."""
    trials = answer.trials
    if BATCH not in trials or answer.target is None or IMAGES_TO_TARGET not in trials:
        return None
    sized = trials[pd.to_numeric(trials[BATCH], errors="coerce").notna()]
    sized = sized[sized[KIND].astype(str).isin(_MEASURED)]
    if sized[BATCH].nunique() < 2:
        return None  # the batch size was not searched
    reached = sized.dropna(subset=[TIME_TO_TARGET_EST_S])
    # A size's representative: its soonest re-measured trial where it has one (an interval to
    # compare by), else its soonest as the search measured it.
    order = reached.assign(_once=reached.get("throughput_source") != "re-measured")
    order = order.sort_values(["_once", TIME_TO_TARGET_EST_S]).drop(columns="_once")
    soonest = order.groupby(BATCH, sort=True).head(1)
    return sized, soonest.sort_values(BATCH)


def _per_size(sized: pd.DataFrame, soonest: pd.DataFrame) -> str:
    """One line per batch size: its trials, how many reached the target, its soonest."""
    lines = []
    for size, group in sized.groupby(BATCH, sort=True):
        best = soonest[soonest[BATCH] == size]
        head = f"- batch {int(size)}: {plural(len(group), 'trial')}, "
        if best.empty:
            lines.append(head + "none reached the target")
            continue
        row = best.iloc[0]
        steps = float(row[IMAGES_TO_TARGET]) / float(size)
        reached = int(group[TIME_TO_TARGET_EST_S].notna().sum())
        lines.append(
            f"{head}{reached} reached the target; compared: `{row[TRIAL_ID]}`: {seconds_text(row)}"
            f", {steps:,.0f} steps"
        )
    return "\n".join(lines)


def _verdict(soonest: pd.DataFrame, remeasure: pd.DataFrame | None, claims: Claims) -> str:
    """Does a larger batch pay, and from which size on does it stop: the claims' words."""
    pairs = _pairs(soonest, remeasure)
    conclusion = claims.text(ANSWER, *_subjects(soonest, _rests_on(pairs)))
    if not pairs:
        return conclusion  # too few sizes reached the target
    said = "; ".join(claims.text(PAIR, *pair.ids) for pair in pairs)
    return (
        "Time to target of the smaller batch over the larger one (above 1x: the larger batch is "
        f"sooner): {said}. {conclusion} {_method()}"
    )


@dataclass(frozen=True)
class _Pair:
    """Two adjacent sizes' representatives and their time ratio (> 1: the larger is sooner)."""

    small: pd.Series
    large: pd.Series
    change: Change

    @property
    def ids(self) -> tuple[str, str]:
        return str(self.small[TRIAL_ID]), str(self.large[TRIAL_ID])

    @property
    def sizes(self) -> list[int]:
        return [int(self.small[BATCH]), int(self.large[BATCH])]


def _pairs(soonest: pd.DataFrame, remeasure: pd.DataFrame | None) -> list[_Pair]:
    rows = [row for _, row in soonest.iterrows()]
    return [_Pair(a, b, larger_sooner(a, b, remeasure)) for a, b in itertools.pairwise(rows)]


def _rests_on(pairs: list[_Pair]) -> list[_Pair]:
    """The pairs the conclusion rests on: up to the first whose larger batch does not pay
    (every pair where each pays)."""
    stop = next((i for i, p in enumerate(pairs) if not pays(p.change)), len(pairs) - 1)
    return pairs[: stop + 1]


def _subjects(soonest: pd.DataFrame, rests: list[_Pair]) -> list[str]:
    """The conclusion's trials: those of the pairs it rests on, else the one (or no) size that
    reached the target."""
    if not rests:
        return [str(t) for t in soonest[TRIAL_ID]]
    return [rests[0].ids[0], *(p.ids[1] for p in rests)]


def larger_sooner(small: pd.Series, large: pd.Series, remeasure: pd.DataFrame | None) -> Change:
    """The smaller batch's time to target / the larger one's (> 1: the larger is sooner), the
    ``batch_time_ratio`` measure (the auditor computes it again from the two trials' rows)."""
    return time_ratio(small, large, throughput_ratio(large, small, remeasure))


def batch_claims(answer: Answer, remeasure: pd.DataFrame | None) -> list[Claim]:
    """The section's claims: each adjacent pair of sizes' time ratio (``batch_pair``), and the
    conclusion (``batch_answer``) on the pairs it rests on ([] where there is no section)."""
    found = _sizes(answer)
    if found is None:
        return []
    sized, soonest = found
    pairs = _pairs(soonest, remeasure)
    claims = [_pair_claim(pair) for pair in pairs]
    rests = _rests_on(pairs)
    reached = [int(s) for s in soonest[BATCH]]
    sizes = [p.sizes[0] for p in rests[:1]] + [p.sizes[1] for p in rests] or reached
    searched = sorted({int(s) for s in sized[BATCH]})  # none of their trials reached the target
    words = {"sizes": sizes, "unreached": [s for s in searched if s not in reached]}
    measures = tuple(m for c in claims[: len(rests)] for m in c.measures)
    claims.append(Claim(ANSWER, tuple(_subjects(soonest, rests)), measures, words))
    return claims


def _pair_claim(pair: _Pair) -> Claim:
    measure = Measure.of(TIME_RATIO, pair.ids, pair.change)
    return Claim(PAIR, pair.ids, (measure,), {"sizes": pair.sizes})


def _method() -> str:
    return (
        "Each size is its soonest trial (re-measured where one was); the time is images to "
        "target / images per second, its interval the crossing's range between evaluations "
        "times the throughput's interval, one seed each (the seed's noise is not in it)."
    )


def _plot(reached: pd.DataFrame, path: Path) -> Image:
    """Images and estimated seconds to the target against batch size, every trial that
    reached it, with the crossing's range and the estimate's interval."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 4.0))
    batch = _num(reached, BATCH)
    images, before = _num(reached, IMAGES_TO_TARGET), _num(reached, IMAGES_TO_TARGET_LOW)
    seconds = _num(reached, TIME_TO_TARGET_EST_S)
    low, high = _num(reached, TIME_TO_TARGET_EST_LOW), _num(reached, TIME_TO_TARGET_EST_HIGH)
    left.errorbar(batch, images, yerr=[images - before, np.zeros_like(images)], fmt="o")
    spread = [np.nan_to_num(seconds - low), np.nan_to_num(high - seconds, posinf=0.0)]
    right.errorbar(batch, seconds, yerr=spread, fmt="o", c="tab:green")
    for ax, label in ((left, "images to target"), (right, "estimated seconds to target")):
        sizes = sorted({int(v) for v in batch})
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.minorticks_off()
        ax.set(xlabel="batch size", ylabel=label)
        ax.grid(alpha=0.3)
    fig.suptitle(f"Time to target vs batch size ({plural(len(reached), 'trial')})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    ids = reached[TRIAL_ID].astype(str)
    points = [
        {"series": "reached the target", "x": float(x), "y": float(y), TRIAL_ID: t}
        for x, y, t in zip(batch, seconds, ids, strict=True)
    ]
    title = f"Time to target vs batch size ({plural(len(reached), 'trial')})"
    return Image(path, "time to target vs batch size", tuple(points), (), title)


def _num(frame: pd.DataFrame, column: str) -> np.ndarray:
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
