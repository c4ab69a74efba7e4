"""What each technique does: the controlled effects table (``effects.csv``: each arm the
recommended config with one knob switched, paired with it by round), and an observational
appendix counting the trials that *ran* with each knob (``effective_<field>``: a switch that
fell back counts as off), where everything else varies between the groups.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tuner.compare import PLAIN, REFERENCE
from tuner.measure import summarize
from tuner.record import KIND, KINDS, is_candidate
from tuner.report.document import change_text, estimate_text
from tuner.stats import Change
from tuner.techniques import KNOBS
from tuner.units import as_number, is_finite, plural

__all__ = [
    "controlled_effects",
    "effects_table",
    "not_tried",
    "observed_techniques",
    "plain_loop_gain",
    "says_nothing",
]


def controlled_effects(effects: pd.DataFrame | None) -> pd.DataFrame:
    """``compare.summarize`` of the effects runs (empty when there were none)."""
    if effects is None or effects.empty:
        return pd.DataFrame()
    return summarize(effects)


def verdict_text(row: Mapping[str, Any]) -> str:
    """In words: faster/slower beyond noise, no measurable effect, fell back, failed."""
    if row.get("failed") and not is_finite(row.get("images_per_second")):
        return f"failed ({row['failed']})"
    if row.get("fell_back"):
        return "fell back: " + str(row["fell_back"])
    change = _speed_change(row)
    ratio = change.value
    if math.isnan(ratio):
        return "not measured"
    if math.isnan(change.low):
        return "one pair: no interval, no verdict"
    if not change.informative:
        return f"no verdict: its interval says nothing ({plural(change.n, 'pair')})"
    if change.tie:  # +-X %: how large an effect could still hide in the noise
        speed = f"no measurable effect on speed (within noise at +-{change.half_width:.0%})"
    else:
        speed = "faster" if ratio > 1 else "slower"
    memory = Change.from_row(row, "memory_change_bytes_vs_reference")
    if memory.separated:
        speed += ", " + ("more" if memory.value > 0 else "less") + " memory"
    return speed


def _speed_change(row: Mapping[str, Any]) -> Change:
    """An arm's throughput ratio to the recommended config, as a :class:`Change`."""
    return Change.from_row(row, "throughput_ratio_vs_reference")


def says_nothing(summary: pd.DataFrame) -> bool:
    """Whether no arm's speed interval says anything (too few pairs, or too noisy): a table of
    such intervals would present noise as a measurement."""
    arms = summary[summary["arm"] != REFERENCE]
    return not arms.empty and not any(_speed_change(row).informative for _, row in arms.iterrows())


def effects_table(summary: pd.DataFrame, verdicts: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The report's table: one row per arm, the recommended config first; each verdict in its
    claim's words (``verdicts``: arm -> words; else :func:`verdict_text`)."""
    return pd.DataFrame(_effects_row(row, verdicts or {}) for _, row in summary.iterrows())


def _effects_row(row: pd.Series, verdicts: Mapping[str, str]) -> dict[str, Any]:
    if row["arm"] == REFERENCE:
        arm, speed, memory, judged = "(none: the recommended config)", "", "", ""
    else:
        arm, judged = row["arm"], verdicts.get(str(row["arm"])) or verdict_text(row)
        speed = change_text(row, "throughput_ratio_vs_reference")
        memory = change_text(row, "memory_change_bytes_vs_reference")
    return {
        "change from the recommended config": arm,
        "images/s": estimate_text(row, "images_per_second", ",.0f"),
        "speed vs recommended": speed,
        "peak memory": estimate_text(row, "peak_memory_bytes", "bytes"),
        "memory vs recommended": memory,
        "verdict": judged,
        "repeats ok": row["repeats_ok"],
    }


def plain_loop_gain(summary: pd.DataFrame, arm: str = PLAIN) -> dict[str, Any] | None:
    """What the recommendation buys over the plain loop (or another all-off ``arm``, such as
    the plain input pipeline): recommended / plain, with interval."""
    if summary.empty or arm not in set(summary["arm"]):
        return None
    row = summary[summary["arm"] == arm].iloc[0]
    key = "throughput_ratio_vs_reference"  # plain / recommended
    ratio, low, high = (as_number(row.get(f"{key}{s}")) for s in ("", "_low", "_high"))
    if math.isnan(ratio) or ratio <= 0:
        return None
    return {
        "ratio": 1 / ratio,
        "low": 1 / high if high > 0 else math.nan,
        "high": 1 / low if low > 0 else math.nan,
        "tie": Change.from_row(row, key).tie,
        "n": _speed_change(row).n,
        "plain_images_per_second": as_number(row.get("images_per_second")),
    }


def observed_techniques(trials: pd.DataFrame) -> pd.DataFrame:
    """Per registry knob and value: trials that ran with it (effective), median images/s."""
    done = trials[trials["status"] == "ok"]
    rows = []
    for entry in KNOBS:
        column = f"effective_{entry.field}"
        if column not in done or entry.companion:
            continue
        values = done[column].dropna().astype(str)
        values = values[values != ""]
        for value, group in done.loc[values.index].groupby(values):
            ips = pd.to_numeric(group["images_per_second"], errors="coerce")
            rows.append(
                {
                    "technique": entry.label,
                    "ran with": f"{entry.field}={value}",
                    "trials": len(group),
                    "median images/s": float(ips.median()),
                }
            )
    return pd.DataFrame(rows)


TRIED_NOT_OK = "tried, none ran ok to its end"


def not_tried(
    trials: pd.DataFrame, searched: list[str], distributions: dict[str, Any]
) -> dict[str, list[str]]:
    """Searched categorical values no trial finished ok with, named (never compared): "not
    tried" when no trial ran them, else each with the kinds its trials were (the trial record's
    word: ``variant=blowup (diverged)``), never the engine's status."""
    found: dict[str, list[str]] = {"not tried": [], TRIED_NOT_OK: []}
    kinds = trials[KIND].astype(str)
    done = trials[kinds.map(is_candidate).astype(bool)]  # bool even with no trial (no row)
    for name, distribution in distributions.items():
        choices = getattr(distribution, "choices", None)
        column = f"param_{name}"
        if choices is None or column not in trials or name not in searched:
            continue
        seen = {str(v) for v in done[column].dropna()}
        values = trials[column].astype(str).where(trials[column].notna())
        for choice in (str(c) for c in choices if str(c) not in seen):
            ran = sorted(set(kinds[values == choice]), key=KINDS.index)
            if ran:
                found[TRIED_NOT_OK].append(f"{name}={choice} ({', '.join(ran)})")
            else:
                found["not tried"].append(f"{name}={choice}")
    return {what: values for what, values in found.items() if values}
