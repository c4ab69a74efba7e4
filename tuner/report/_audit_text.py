"""The auditor's checks of a report's words where no record holds them (:mod:`tuner.report.audit`):
every verdict word against its interval by the one rule (:attr:`tuner.stats.Change.verdict`),
in a report from before its every section's records (an ablation's, a benchmark's, an old one);
each trials table row's kind against trials.csv."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

import pandas as pd

from tuner.record import KIND, KINDS, TRIAL_ID
from tuner.stats import MIN_PAIRS, Change
from tuner.units import DASH

__all__ = ["Finding", "check_intervals", "check_kinds"]

_NUMBER = r"[+-]?\d[\d,]*(?:\.\d+)?"
# A ratio with its interval as ratio_text writes it: 1.07x [1.01–1.13].
_RATIO = re.compile(rf"({_NUMBER})x \[({_NUMBER}){DASH}({_NUMBER})\]")
# An accuracy difference as change_text writes it: +1.0 pts [-2.0 pts–+4.0 pts].
_POINTS = re.compile(rf"({_NUMBER}) pts \[({_NUMBER}) pts{DASH}({_NUMBER}) pts\]")
_PAIRS = re.compile(r"(\d+) pairs?\b")
# The words that claim a verdict, by the verdict they claim (Change.verdict's names).
_WORDS = {
    "separated": ("beyond noise", "outside the noise", "faster", "slower"),
    "tie": (
        "within noise",
        "within the noise",
        "inside the noise",
        "a tie",
        "**tie**",
        "tie (",
        "not measurably faster",  # whole, so its "faster" is not read as a claim of its own
        "not measurably slower",
        "not measurably",
        "no measurable effect",
        "same speed",
    ),
    "uninformative": ("says nothing", "say nothing", "no verdict"),
}
_DURATION = re.compile(r"\b(?:(\d+)h(\d\d)m|(\d+)m(\d\d)s|(\d+)s)\b")


class Finding:
    """One claim the data does not support: which check, where, the claim, and why."""

    def __init__(self, check: str, where: str, claim: str, why: str) -> None:
        self.check, self.where, self.claim, self.why = check, where, claim.strip(), why

    def line(self) -> str:
        claim = self.claim if len(self.claim) <= 160 else self.claim[:157] + "..."
        return f"{self.check}: {self.where}: {claim!r}: {self.why}"

    def __repr__(self) -> str:
        return f"Finding({self.line()})"


# ---- intervals -------------------------------------------------------------------------------


def check_intervals(text: str, where: str) -> list[Finding]:
    """Every interval shown with a verdict word: the word must be the one the rule allows, and
    an interval that says nothing must be named so wherever it is shown. In prose the word
    nearest the interval is its claim; in a table row, a word in its own cell, else the words
    of the row's cells that show no value of their own (the verdict column)."""
    found: list[Finding] = []
    for unit, cells in _units(text):
        plain = " ".join(c for c in cells if not _shows_value(c))
        for cell in cells:
            for match, neutral in _intervals(cell):
                change = _change(match, neutral, unit)
                if len(cells) == 1:  # prose
                    claimed = _claimed(unit, match, nearest=True)
                else:
                    claimed = _claimed(cell, match) or _claimed(plain, match)
                if not _allowed(claimed, change):
                    why = (
                        f"it says {claimed}, but by the one rule the interval is {change.verdict}"
                        if claimed
                        else "shown bare, as a measurement, but by the one rule it says nothing"
                    )
                    found.append(Finding("interval", where, match.group(0), why))
    return found


def _shows_value(cell: str) -> bool:
    """A table cell that shows a value with its own words (``tie (+0 B)``, an interval)."""
    return bool(re.match(r"(tie|says nothing) \(", cell)) or any(_intervals(cell))


def _units(text: str) -> Iterator[tuple[str, list[str]]]:
    """Clauses of prose (a sentence, or a part of it between semicolons) and table rows, each
    with its cells (a clause is its own one cell)."""
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            yield line, cells
            continue
        for clause in re.split(r"(?<=[.!?])\s+(?=[A-Z*`])|;\s", line):
            yield clause, [clause]


def _intervals(cell: str) -> Iterator[tuple[re.Match[str], float]]:
    yield from ((m, 1.0) for m in _RATIO.finditer(cell))
    yield from ((m, 0.0) for m in _POINTS.finditer(cell))


def _change(match: re.Match[str], neutral: float, unit: str) -> Change:
    value, low, high = (float(g.replace(",", "")) for g in match.groups())
    pairs = _PAIRS.search(unit)
    n = int(pairs.group(1)) if pairs else MIN_PAIRS  # unsaid: judged by the width alone
    return Change(value, low, high, n, neutral)


def _claimed(text: str, match: re.Match[str], *, nearest: bool = False) -> str:
    """The verdict the words in ``text`` claim of the interval ``match`` ("" when none): in a
    cell, any word; in a clause, the word nearest the interval. A word inside a longer one
    ("faster" in "not measurably faster") is the longer one's."""
    start = text.find(match.group(0))
    end = start + len(match.group(0))
    spans = [
        (found.start(), found.end(), verdict)
        for verdict, words in _WORDS.items()
        for word in words
        for found in re.finditer(re.escape(word), text)
    ]
    spans = [s for s in spans if not any(_inside(s, other) for other in spans)]
    if not spans:
        return ""
    if not nearest:
        return spans[0][2]
    return min((max(a - end, start - b, 0), verdict) for a, b, verdict in spans)[1]


def _inside(span: tuple[int, int, str], other: tuple[int, int, str]) -> bool:
    """Whether ``span`` lies within ``other`` and is shorter."""
    return (
        other[0] <= span[0] and span[1] <= other[1] and (other[1] - other[0]) > (span[1] - span[0])
    )


def _allowed(claimed: str, change: Change) -> bool:
    if not change.has_interval:
        return True
    if claimed == "":  # shown bare: fine unless it says nothing
        return change.verdict != "uninformative"
    if claimed == "uninformative":  # "no verdict" is always allowed of a wide or unsure one
        return change.verdict in ("uninformative", "none") or change.n < MIN_PAIRS
    return claimed == change.verdict


# ---- durations -------------------------------------------------------------------------------


def seconds_of(text: str) -> float:
    """The seconds a ``duration_text`` says (``1m16s`` -> 76; NaN when it is none)."""
    match = _DURATION.fullmatch(text.strip())
    if not match:
        return math.nan
    h, hm, m, ms, s = (int(g) if g else 0 for g in match.groups())
    return h * 3600 + hm * 60 + m * 60 + ms + s


# ---- kinds -----------------------------------------------------------------------------------


def check_kinds(text: str, where: str, trials: pd.DataFrame) -> list[Finding]:
    """Each table row naming a trial and a kind (the trials tables of the report, which show
    every trial's row as trials.csv holds it) names the kind trials.csv has."""
    kinds = kinds_of(trials)
    found = []
    for line in text.splitlines():
        cells = [c.strip().strip("`") for c in line.strip("|").split("|")]
        if line.startswith("|") and len(cells) > 1:
            tid = next((c for c in cells if c in kinds), None)
            said = [c for c in cells if c in KINDS]
            if tid and said and said[0] != kinds[tid]:
                why = f"trials.csv says {kinds[tid]!r}"
                found.append(Finding(KIND, where, f"{tid} {said[0]}", why))
    return found


def kinds_of(rows: Any) -> dict[str, str]:
    """trial id -> kind of a trials table."""
    return dict(zip(rows[TRIAL_ID].astype(str), rows[KIND].astype(str), strict=True))
