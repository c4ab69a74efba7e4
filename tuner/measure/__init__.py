"""The measurement helpers beside :mod:`tuner.stats` (no torch, no Ray): pairing and
summarizing runs, the resolution that ends a measurement, its method's words and the sentences
made of its record (:func:`measured_text`, :func:`ended_text`, :func:`budget_text`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuner.measure.summary import paired, paired_column, summarize
from tuner.stats import MIN_PAIRS
from tuner.units import duration_text

__all__ = [
    "FRESH",
    "METHOD",
    "RESOLUTION",
    "WINDOWS",
    "budget_text",
    "clock_seconds",
    "ended_text",
    "measured_text",
    "paired",
    "paired_column",
    "summarize",
]

RESOLUTION = 0.03  # stop once every interval is within +-3 % of its ratio
METHOD = (
    "interleaved rounds, paired by round; 95 % t-intervals of the log-ratio; stopped on the "
    "intervals' widths only (fixed-width sequential, Chow-Robbins), never on their side of 1x"
)
WINDOWS, FRESH = "windows of one build", "a fresh build per measurement"  # METHOD's last part
_BUDGET_SLACK_S = 0.5  # a limit met to within the clock's rounding (seconds are kept to 0.1)


def ended_text(info: dict[str, Any]) -> str:
    """What ended a measurement, in words (from its record: ``stopped``, ``resolution``)."""
    stopped = str(info.get("stopped"))
    return {
        "resolved": f"every interval within +-{float(info.get('resolution') or 0):.0%}",
        "time limit": "the time limit (--trust-budget)",
        "max repeats": "the most rounds allowed",
    }.get(stopped, stopped)


def measured_text(info: Mapping[str, Any]) -> str:
    """How a comparison ran and ended, in words (from its record: ``method``, ``repeats_done``)."""
    rounds = info.get("repeats_done")
    if rounds is None:  # an experiment from before the record: fresh runs, fixed repeats
        return "in short fresh runs, repeated"
    kind = "windows of one build per arm" if WINDOWS in str(info.get("method")) else "fresh runs"
    spent = budget_text(info)
    return f"in {rounds} rounds of short {kind}, ended by {ended_text(dict(info))}" + (
        f"; it {spent}" if spent else ""
    )


def budget_text(info: Mapping[str, Any]) -> str:
    """The seconds a comparison took against its time limit (empty without one)."""
    limit, seconds = info.get("time_limit_s"), info.get("seconds")
    if not isinstance(limit, int | float) or not isinstance(seconds, int | float):
        return ""
    took = f"took {duration_text(clock_seconds(info))}"
    if round(clock_seconds(info)) != round(seconds):  # the task's start-up is no measuring
        took += f" on the clock, {duration_text(seconds)} of it measuring"
    if seconds <= limit + _BUDGET_SLACK_S:
        return f"{took}, within its {duration_text(limit)} limit"
    return (
        f"{took}: {duration_text(seconds - limit)} over its {duration_text(limit)} limit, as "
        f"the builds and the first rounds (up to {MIN_PAIRS}) run even past it"
    )


def clock_seconds(info: Mapping[str, Any]) -> float:
    """A measuring phase's seconds on the driver's clock, else (an older record) its own."""
    started, ended = info.get("started_unix_s"), info.get("ended_unix_s")
    if isinstance(started, int | float) and isinstance(ended, int | float):
        return float(ended) - float(started)
    return float(info.get("seconds") or 0.0)
