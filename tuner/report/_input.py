"""The report's "Input pipeline" section, for the recommended config: what its loader delivered
alone against what training took from it, how long the steps waited for data (data-bound or
compute-bound), the loader settings it ran with and their measured effects (the controlled
effects, with intervals), and whether more workers or a faster decoder could help here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tuner.compare import PLAIN_LOADER, REFERENCE
from tuner.engine.result import DATA_BOUND_WAIT, bound_of
from tuner.report._effects import effects_table, plain_loop_gain
from tuner.report.document import Section, Table, estimate_text
from tuner.stats import Change
from tuner.techniques import knob, loader_knobs
from tuner.units import as_number, is_finite, ratio_text

__all__ = ["input_section"]


def input_section(recommended: Mapping[str, Any] | None, effects: pd.DataFrame) -> Section | None:
    """The section for the recommended trial's row (``Answer.recommended``) and the controlled
    effects (``controlled_effects``); ``None`` without a recommendation."""
    if recommended is None:
        return None
    section = Section("Input pipeline", anchor="input")
    wait = as_number(recommended.get("data_wait_fraction"))
    bound = recommended.get("bound")
    if math.isnan(wait):
        section.blocks.append("The recommended trial's wait for data was not measured.")
        return section
    if "bound" not in recommended:  # an experiment recorded before the verdict was
        bound = bound_of(wait)
    if not isinstance(bound, str) or not bound:
        section.blocks.append(
            "The recommended trial's data lives on the device (synthetic): there is no input "
            "pipeline to measure."
        )
        return section
    section.blocks += [_rates(recommended, wait, bound), _settings(recommended)]
    rows = _loader_rows(effects)
    if rows.empty:
        section.blocks.append(
            "No loader setting was re-measured around the recommended config (--effects-repeats "
            "0, or none applies): the speed probes' choices are in the next section."
        )
    else:
        section.blocks.append(_reference_note(recommended))
        section.blocks.append(Table(effects_table(rows), "Loader settings switched one at a time"))
    section.blocks.append(_together(effects) + _would_help(wait, bound, rows))
    return section


def _together(effects: pd.DataFrame) -> str:
    """What the loader settings buy together over the plain input pipeline, measured."""
    gain = plain_loop_gain(effects, PLAIN_LOADER) if not effects.empty else None
    if gain is None:
        return ""
    change = Change(gain["ratio"], gain["low"], gain["high"], gain["n"], 1.0)
    measured = ratio_text(gain["ratio"], gain["low"], gain["high"])
    against = "the plain input pipeline (every loader knob off)"
    if change.verdict in ("none", "uninformative"):
        return f"Against {against}: {measured}, from an interval that says nothing. "
    if change.verdict == "tie":
        return (
            f"Together, the loader settings are a **tie** with {against}{_plain_wait(effects)}:"
            f" {measured}. "
        )
    word = "faster" if gain["ratio"] > 1 else "slower"
    return (
        f"Together, the loader settings make it **{measured} {word}** than {against}"
        f"{_plain_wait(effects)}. "
    )


def _plain_wait(effects: pd.DataFrame) -> str:
    """``, whose steps waited 44% of their time for data (data-bound)``, from its runs."""
    row = effects[effects["arm"] == PLAIN_LOADER].iloc[0]
    wait = as_number(row.get("data_wait_fraction"))
    if math.isnan(wait):
        return ""
    return f", whose steps waited {wait:.0%} of their time for data ({bound_of(wait)}-bound)"


def _rates(row: Mapping[str, Any], wait: float, bound: str) -> str:
    # The search's figure: what it trained at, beside its loader measured in the same process
    # (a re-measurement alone is another measurement: named as such).
    trained = as_number(row.get("search_images_per_second", row.get("images_per_second")))
    alone = as_number(row.get("loader_images_per_second"))
    loader = (
        f"its train loader alone (no training, in the same process, after it trained) "
        f"delivered {alone:,.0f} images/s, {alone / trained:.1f}x what training took"
        if is_finite(alone) and trained > 0
        else "its loader alone was not measured (the run stopped early, or had too few batches)"
    )
    again = ""
    if row.get("throughput_source") == "re-measured":
        again = (
            f" (re-measured alone after the search: "
            f"{estimate_text(row, 'images_per_second', ',.0f')} images/s, the answer's figure)"
        )
    return (
        f"The recommended trial trained at {trained:,.0f} images/s in the search{again}; "
        f"{loader}. Its steps waited "
        f"for the next batch {wait:.0%} of their time: **{bound}-bound** (data-bound from "
        f"{DATA_BOUND_WAIT:.0%}: a wait that large, removed, would make it at least "
        f"{1 / (1 - DATA_BOUND_WAIT):.2f}x faster)."
    )


def _reference_note(row: Mapping[str, Any]) -> str:
    """Why the table's first row is not the figure the answer and the sentence above give."""
    source = "re-measured alone" if row.get("throughput_source") == "re-measured" else "search"
    figure = estimate_text(row, "images_per_second", ",.0f")
    return (
        "The table's first row is the recommended config measured again in the effects step's "
        'own short runs, interleaved with each changed setting (section "What each technique '
        f"does\"), so its images/s differ from the answer's ({figure} images/s, {source}): "
        "compare the rows with each other."
    )


def _settings(row: Mapping[str, Any]) -> str:
    ran = []
    for field in (k.field for k in loader_knobs()):
        value = row.get(f"effective_{field}")
        if value is None or pd.isna(value) or str(value) == "":  # not reported: its off value
            value = knob(field).off
        ran.append(f"{field}={value}")
    return "It ran with " + ", ".join(ran) + " (what actually ran, fallbacks included)."


def _field_of(arm: str) -> str:
    """The knob an effects arm switched: ``+host_prefetch`` and ``decoder=pil`` name theirs."""
    return arm.lstrip("+-").split("=", 1)[0]


def _loader_rows(effects: pd.DataFrame) -> pd.DataFrame:
    """The recommended config's row and its loader-knob arms from the controlled effects."""
    if effects.empty:
        return effects
    fields = effects["arm"].astype(str).map(_field_of)
    loader = fields.isin([k.field for k in loader_knobs()]) | (effects["arm"] == PLAIN_LOADER)
    if not loader.any():
        return effects.iloc[0:0]
    return effects[(effects["arm"] == REFERENCE) | loader]


def _would_help(wait: float, bound: str, rows: pd.DataFrame) -> str:
    """Whether more workers or a faster decoder could help on this machine: what the wait
    says, and only the switched settings' effects that were measured beyond noise."""
    clear = _clear_verdicts(rows)
    evidence = (
        " Measured beyond noise around this config: " + "; ".join(clear) + "."
        if clear
        else " No loader setting switched around this config measured a difference."
    )
    if bound == "compute":
        return (
            f"**The model, not the loader, is the limit on this machine:** the steps waited "
            f"for data {wait:.0%} of their time, so more workers or a faster decoder have "
            "little wait left to remove (on a CPU a cheaper loader can still leave the model "
            "more of the cores, which only a measured effect shows)." + evidence
        )
    ceiling = 1 / (1 - wait) if wait < 1 else math.inf
    return (
        f"**The input pipeline is the limit on this machine:** the steps waited for data "
        f"{wait:.0%} of their time. A ceiling, not a finding: were no step to wait at all, it "
        f"would run at most {ceiling:.2f}x faster (from the wait's share alone, not measured); "
        "what a setting buys is only what its measured effect shows." + evidence
    )


def _clear_verdicts(rows: pd.DataFrame) -> list[str]:
    """``num_workers=0: 0.93x [0.90–0.97], slower`` for each loader arm (not the all-off one)
    whose interval excludes 1x."""
    if rows.empty:
        return []
    found = []
    table = effects_table(rows)
    for (_, row), (_, shown) in zip(rows.iterrows(), table.iterrows(), strict=True):
        verdict = str(shown["verdict"])
        if row["arm"] in (REFERENCE, PLAIN_LOADER) or verdict.split(",")[0] not in _CLEAR:
            continue
        found.append(f"{row['arm']}: {shown['speed vs recommended']}, {verdict}")
    return found


_CLEAR = ("faster", "slower")  # tuner.report._effects' verdicts beyond noise
