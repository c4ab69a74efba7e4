"""Time to a target accuracy for every trial, from its own accuracy curve (``Experiment.curves``;
DAWNBench's and MLPerf's figure), and the target when none is given. The true crossing lies
between the first evaluation at or above the target and the one before: every comparison
carries that range. The answer decides on the load-independent estimate (images to target /
images per second, re-measured side by side), not the stopwatch's time (slowed by whatever ran
beside the trial); tuner.record declares each column. Ray-free and Optuna-free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tuner.decision import accuracy_test
from tuner.record import (
    IMAGES_TO_TARGET,
    IMAGES_TO_TARGET_LOW,
    TARGET_ACCURACY,
    TIME_TO_TARGET_EST_HIGH,
    TIME_TO_TARGET_EST_LOW,
    TIME_TO_TARGET_EST_S,
    TIME_TO_TARGET_SOURCE,
    TRAIN_TIME_TO_TARGET_S,
    TRIAL_ID,
    declared_dtype,
)
from tuner.stats import Change
from tuner.units import DASH, as_number, format_bytes, interval_text

__all__ = [
    "RULE",
    "TARGET_COLUMNS",
    "RulePick",
    "Target",
    "change_text",
    "choose_by_time",
    "derive_target",
    "estimated_times",
    "given_target",
    "pick_sentence",
    "points_text",
    "rule_sentence",
    "seconds_text",
    "time_ratio",
    "time_to_target",
    "why_picked",
    "with_time_to_target",
]

# The trials-table columns this module adds, in order (tuner.record declares each).
TARGET_COLUMNS = (
    TARGET_ACCURACY,
    IMAGES_TO_TARGET,
    IMAGES_TO_TARGET_LOW,
    TRAIN_TIME_TO_TARGET_S,
    TIME_TO_TARGET_EST_S,
    TIME_TO_TARGET_EST_LOW,
    TIME_TO_TARGET_EST_HIGH,
    TIME_TO_TARGET_SOURCE,
)
_REACHED = 1e-9  # an accuracy equal to the target (a count over the same images) reaches it


@dataclass(frozen=True)
class Target:
    """The accuracy every trial's time is measured to, and how it was chosen."""

    accuracy: float  # NaN: no target (no candidate measured an accuracy)
    given: bool  # --target-accuracy (or the workload's target_accuracy)
    how: str  # one sentence: the rule that set it


def time_to_target(curves: pd.DataFrame, target: float) -> pd.DataFrame:
    """Per trial of ``curves`` (indexed by trial id): images at its first evaluation at or above
    ``target`` and at the one before, and the stopwatch's seconds at it (NaN: never reached)."""
    out: dict[str, dict[str, float]] = {}
    for trial_id, curve in curves.groupby(TRIAL_ID, sort=False):
        curve = curve.drop_duplicates("images_seen").sort_values("images_seen")
        reached = curve["val_accuracy"] >= target - _REACHED
        if math.isnan(target) or not reached.any():
            out[str(trial_id)] = dict.fromkeys(_CURVE_FIGURES, math.nan)
            continue
        at = int(reached.to_numpy().argmax())
        before = float(curve["images_seen"].iloc[at - 1]) if at > 0 else 0.0
        out[str(trial_id)] = {
            IMAGES_TO_TARGET: float(curve["images_seen"].iloc[at]),
            IMAGES_TO_TARGET_LOW: before,
            TRAIN_TIME_TO_TARGET_S: float(curve["train_time_s"].iloc[at]),
        }
    return pd.DataFrame.from_dict(out, orient="index", columns=list(_CURVE_FIGURES))


_CURVE_FIGURES = (IMAGES_TO_TARGET, IMAGES_TO_TARGET_LOW, TRAIN_TIME_TO_TARGET_S)


def estimated_times(trials: pd.DataFrame, curves: pd.DataFrame, target: Target) -> pd.DataFrame:
    """``trials`` (the decision values) with :data:`TARGET_COLUMNS` added: the estimate's
    interval is from the evaluation before the crossing and the throughput's interval."""
    figures = time_to_target(curves, target.accuracy)
    frame = trials.copy()
    frame[TARGET_ACCURACY] = target.accuracy
    ids = frame[TRIAL_ID].astype(str)
    for column in _CURVE_FIGURES:
        frame[column] = ids.map(figures[column]).astype(float)
    ips = pd.to_numeric(frame["images_per_second"], errors="coerce")
    low = pd.to_numeric(frame.get("images_per_second_low"), errors="coerce")
    high = pd.to_numeric(frame.get("images_per_second_high"), errors="coerce")
    frame[TIME_TO_TARGET_EST_S] = frame[IMAGES_TO_TARGET] / ips
    frame[TIME_TO_TARGET_EST_LOW] = frame[IMAGES_TO_TARGET_LOW] / high
    frame[TIME_TO_TARGET_EST_HIGH] = frame[IMAGES_TO_TARGET] / low
    source = frame.get("throughput_source", pd.Series("search", index=frame.index))
    frame[TIME_TO_TARGET_SOURCE] = source.where(frame[IMAGES_TO_TARGET].notna(), "")
    return frame


def time_ratio(slower: Mapping[str, Any], sooner: Mapping[str, Any], throughput: Change) -> Change:
    """How many times longer ``slower`` takes to the target than ``sooner`` on the estimate
    (``throughput``: ``sooner`` / ``slower`` in images/s, paired). The interval is the
    crossings' ranges (a hard bound) times the throughput's; none without the latter."""
    images = [as_number(row.get(IMAGES_TO_TARGET)) for row in (slower, sooner)]
    before = [as_number(row.get(IMAGES_TO_TARGET_LOW)) for row in (slower, sooner)]
    value = images[0] / images[1] * throughput.value
    if not throughput.has_interval:
        return Change(value, math.nan, math.nan, throughput.n, 1.0)
    low = before[0] / images[1] * throughput.low
    high = images[0] / before[1] * throughput.high if before[1] > 0 else math.inf
    return Change(value, low, high, throughput.n, 1.0)


def given_target(metadata: Mapping[str, Any]) -> float | None:
    """The target the search was given: --target-accuracy, else the workload's
    ``target_accuracy`` (``--set``); None: derive one."""
    options, workload = metadata.get("options"), metadata.get("workload")
    for source in (options, workload):
        value = source.get(TARGET_ACCURACY) if isinstance(source, Mapping) else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def derive_target(pool: pd.DataFrame, given: float | None) -> Target:
    """The target: ``given``, or derived from the candidates ``pool`` (``how`` says the rule)."""
    if given is not None:
        return Target(float(given), True, f"the target accuracy {given:.3f} was given.")
    accuracy = pd.to_numeric(pool.get("val_accuracy"), errors="coerce").dropna()
    if accuracy.empty:
        return Target(math.nan, False, "no target: no candidate measured an accuracy.")
    best = pool.loc[accuracy.idxmax()]
    bound, median = as_number(best.get("val_accuracy_low")), float(accuracy.median())
    best_bound = f"the most accurate candidate's lower 95% bound ({best[TRIAL_ID]}: {bound:.3f})"
    median_text = f"median final accuracy of the {len(accuracy)} candidates ({median:.3f})"
    derived = "is derived (no --target-accuracy):"
    if bound > 0:
        target = min(bound, median)
        how = (
            f"the lower of {best_bound} and the {median_text}, so that at least half of them "
            "reach it and none is held to more than the best can claim."
        )
    else:  # an interval clipped at 0 (few runs) or none bounds nothing: a target of 0 asks
        # nothing, every trial "reaches" it at its first evaluation
        target = median
        said = (
            "no bound of the most accurate was measured"
            if math.isnan(bound)
            else f"{best_bound} bounds nothing"
        )
        how = f"the {median_text}, so that at least half of them reach it ({said})."
    how = f"the target accuracy {target:.3f} {derived} {how}"
    return Target(target, False, how)


RULE = (
    "recommend the configuration that reaches the target accuracy in the fewest seconds (images "
    "to target / images per second, re-measured side by side); where two times cannot be told "
    "apart, the one with less peak memory, and with the same memory the more accurate beyond "
    "noise"
)


@dataclass(frozen=True)
class RulePick:
    """The rule's pick among the candidates that reached the target, and against whom."""

    pick: str  # trial id
    soonest: str  # the soonest on the estimate
    versus: str | None  # the next soonest when the pick is the soonest, else the soonest
    change: Change | None  # the pick is the soonest: versus's time / its; else its / soonest's
    within_noise: tuple[str, ...]  # candidates whose time cannot be told from the soonest's
    reached: int  # candidates that reached the target
    candidates: int  # candidates with a curve
    reason: str = "soonest"  # soonest | memory | accuracy: what chose among the close ones
    accuracy: Change | None = None  # reason accuracy: the pick minus the soonest


def choose_by_time(
    pool: pd.DataFrame, throughput_ratio: Callable[[str, str], Change]
) -> RulePick | None:
    """The rule (:data:`RULE`) over ``pool`` (candidates with :data:`TARGET_COLUMNS`); None when
    none reached the target. ``throughput_ratio(a, b)``: a's images/s over b's, paired."""
    reached = pool[pool[TIME_TO_TARGET_EST_S].notna()].sort_values(TIME_TO_TARGET_EST_S)
    if reached.empty:
        return None
    rows = {str(row[TRIAL_ID]): row for _, row in reached.iterrows()}
    soonest = next(iter(rows))

    def ratio(slower: str, sooner: str) -> Change:
        return time_ratio(rows[slower], rows[sooner], throughput_ratio(sooner, slower))

    close = tuple(t for t in rows if t != soonest and not ratio(t, soonest).separated)
    pick, reason, accuracy = _among_close(rows, soonest, close)
    counts = (close, len(rows), len(pool))
    if pick != soonest:  # the pick's time / the soonest's: inside the noise
        return RulePick(pick, soonest, soonest, ratio(pick, soonest), *counts, reason, accuracy)
    versus = next((t for t in rows if t != soonest), None)
    change = None if versus is None else ratio(versus, pick)
    return RulePick(pick, soonest, versus, change, *counts)


# Peak memories closer than this share are the same memory: two configs of one batch size and
# norm differ by a few KiB of allocator state (14.8 MiB against 14.8 MiB picked one over a
# sooner, more accurate config); a sentence cannot claim "less" for what it prints alike. README
# states it; RULE's sentence stays as older reports' records wrote it (`report --check` reads
# them).
MEMORY_RESOLUTION = 0.01


def _less_memory(one: float, other: float) -> bool:
    return one < other * (1 - MEMORY_RESOLUTION)


def _among_close(
    rows: Mapping[str, Mapping[str, Any]], soonest: str, close: tuple[str, ...]
) -> tuple[str, str, Change | None]:
    """Among the soonest and those it cannot be told from: less peak memory (measured, and
    less), then, with the same memory, the more accurate than the soonest beyond noise."""
    memory = {t: as_number(rows[t].get("peak_memory_bytes")) for t in (soonest, *close)}
    known = {t: m for t, m in memory.items() if math.isfinite(m)}
    if not close or soonest not in known:
        return soonest, "soonest", None
    lightest = min(known.values())
    if _less_memory(lightest, known[soonest]):
        return min(known, key=lambda t: known[t]), "memory", None  # sorted by time: soonest of
    same = [t for t in close if t in known and not _less_memory(known[soonest], known[t])]
    changes = {t: accuracy_test(rows[t], rows[soonest]) for t in same}
    ahead = {t: c for t, c in changes.items() if c.separated and c.value > 0}
    if not ahead:
        return soonest, "soonest", None
    best = max(ahead, key=lambda t: ahead[t].value)
    return best, "accuracy", ahead[best]


# ---- in words (the report, the console and --json say these same sentences) -----------------


def rule_sentence(target: Target) -> str:
    """The rule in one sentence, and how the target was set."""
    return f"The rule: {RULE}. {target.how[0].upper()}{target.how[1:]}"


def seconds_text(row: Mapping[str, Any]) -> str:
    """``0.52 s [0.31–0.60] (1,536 images)``: a trial's estimated time to target."""
    value = as_number(row.get(TIME_TO_TARGET_EST_S))
    low, high = (as_number(row.get(k)) for k in (TIME_TO_TARGET_EST_LOW, TIME_TO_TARGET_EST_HIGH))
    interval = f" [{low:.3g}{DASH}{high:.3g}]" if math.isfinite(low) and math.isfinite(high) else ""
    images = as_number(row.get(IMAGES_TO_TARGET))
    return f"{value:.3g} s{interval} ({images:,.0f} images)"


def change_text(change: Change) -> str:
    """``1.52x [1.10–2.40], beyond noise``: a time ratio and what its interval allows."""
    bound = "unbounded" if math.isinf(change.high) else f"{change.high:.2f}"
    interval = f" [{change.low:.2f}{DASH}{bound}]" if change.has_interval else ""
    words = {
        "separated": "beyond noise",
        "tie": "a tie within noise",
        "uninformative": "an interval that says nothing",
        "none": "no interval: not re-measured side by side",
    }[change.verdict]
    return f"{change.value:.2f}x{interval}, {words}"


def why_picked(rule: RulePick) -> str:
    """What made the rule's pick, in a clause."""
    if rule.reason == "memory":
        return "its time to target cannot be told from the soonest's and it needs less memory"
    if rule.change is not None and rule.change.separated:
        return "it reaches the target accuracy sooner, beyond noise"
    return "it is the soonest to the target as measured, though not beyond noise"


def pick_sentence(rule: RulePick, rows: Mapping[str, Mapping[str, Any]]) -> str:
    """Why the rule picked what it did, with its time and the comparison it rests on."""
    pick, soonest, versus = rule.pick, rule.soonest, rule.versus
    time = seconds_text(rows[pick])
    if versus is None or rule.change is None:
        return (
            f"`{pick}` is the only candidate that reached the target ({rule.reached} of "
            f"{rule.candidates}): {time} to it."
        )
    ratio = change_text(rule.change)
    if pick != soonest:
        memory = [format_bytes(rows[t].get("peak_memory_bytes")) for t in (pick, soonest)]
        why = (
            f"it needs less peak memory ({memory[0]} against {memory[1]})"
            if rule.reason == "memory"
            else f"with the same peak memory ({memory[0]}) it is more accurate beyond noise, by "
            f"{points_text(rule.accuracy) if rule.accuracy else 'n/a'}"
        )
        return (
            f"`{pick}` is the pick: its time to target, {time}, cannot be told from the "
            f"soonest's (`{soonest}`, {seconds_text(rows[soonest])}; its time over the "
            f"soonest's: {ratio}), and {why}."
        )
    if rule.change.separated:
        return (
            f"`{pick}` reaches the target soonest: {time}; the next, `{versus}`, takes {ratio} "
            "as long."
        )
    memory = as_number(rows[pick].get("peak_memory_bytes"))
    close = ", ".join(
        f"`{t}` {format_bytes(rows[t].get('peak_memory_bytes'))}" for t in rule.within_noise
    )
    others = [as_number(rows[t].get("peak_memory_bytes")) for t in rule.within_noise]
    if math.isnan(memory):
        why = "peak memory was not measured, so the soonest as measured is shown"
    elif all(memory < m for m in others):
        why = f"it also needs the least peak memory of them ({format_bytes(memory)}; {close})"
    else:
        why = (
            f"neither memory ({format_bytes(memory)}; {close}) nor final accuracy tells them "
            "apart beyond noise, so the soonest as measured is shown"
        )
    return (
        f"`{pick}` reaches the target soonest as measured: {time}; the next, `{versus}`, takes "
        f"{ratio}, so their times cannot be told apart, and {why}."
    )


def with_time_to_target(trials: pd.DataFrame, decided: pd.DataFrame) -> pd.DataFrame:
    """The trials table with :data:`TARGET_COLUMNS` from the answer's ``decided`` rows, typed."""
    if TIME_TO_TARGET_EST_S not in decided:
        return trials
    figures = decided.set_index(decided[TRIAL_ID].astype(str))[list(TARGET_COLUMNS)]
    added = figures.reindex(trials[TRIAL_ID].astype(str)).set_index(trials.index)
    added[TIME_TO_TARGET_SOURCE] = added[TIME_TO_TARGET_SOURCE].replace("", None)
    added = added.astype({c: str(declared_dtype(c)) for c in TARGET_COLUMNS})
    return pd.concat([trials.drop(columns=list(TARGET_COLUMNS), errors="ignore"), added], axis=1)


def points_text(change: Change) -> str:
    """``7.5 accuracy points [2.1–12.9]``: an accuracy difference, with its interval or none."""
    value = 100 * abs(change.value)
    if not change.has_interval:
        return f"{value:.1f} accuracy points (no interval)"
    sign = 1 if change.value >= 0 else -1
    low, high = sorted((100 * sign * change.low, 100 * sign * change.high))
    return f"{value:.1f} accuracy points {interval_text(low, high, '{:.1f}'.format)}"
