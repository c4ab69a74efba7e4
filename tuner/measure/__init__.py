"""The measurement helpers beside :mod:`tuner.stats`: the one pairing of a comparison's runs
(:func:`paired`), each arm's medians and paired changes (:func:`summarize`), the resolution that
ends a measurement and its record in words (:mod:`tuner.measure.method`). No torch, no Ray:
:mod:`tuner.compare` and :mod:`tuner.speed` measure with them; :mod:`tuner.answer` and
:mod:`tuner.report` read their numbers with them.
"""

from __future__ import annotations

from tuner.measure.method import (
    FRESH,
    METHOD,
    RESOLUTION,
    WINDOWS,
    budget_text,
    clock_seconds,
    ended_text,
    measured_text,
)
from tuner.measure.pairing import paired
from tuner.measure.summary import paired_column, summarize

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
