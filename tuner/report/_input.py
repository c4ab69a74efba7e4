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
from tuner.engine.result import bound_of
from tuner.record import TRIAL_ID
from tuner.report._effects import effects_table, verdict_text
from tuner.report.claims import Claims
from tuner.report.document import Section, Table, estimate_text
from tuner.techniques import knob, loader_knobs
from tuner.units import as_number, is_finite

__all__ = ["input_section", "loader_clear_arms", "loader_rows"]


def input_section(
    recommended: Mapping[str, Any] | None, effects: pd.DataFrame, claims: Claims
) -> Section | None:
    """The section for the recommended trial's row (``Answer.recommended``) and the controlled
    effects (``controlled_effects``), its verdicts in their claims' words; ``None`` without a
    recommendation."""
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
    rates = _rates(recommended, wait, bound, claims.text("rule", "data_bound"))
    section.blocks += [rates, _settings(recommended)]
    rows = loader_rows(effects)
    if rows.empty:
        section.blocks.append(
            "No loader setting was re-measured around the recommended config (--effects-repeats "
            "0, or none applies): the speed probes' choices are in the next section."
        )
    else:
        section.blocks.append(_reference_note(recommended))
        section.blocks.append(Table(effects_table(rows), "Loader settings switched one at a time"))
    trial = str(recommended.get(TRIAL_ID))
    evidence = claims.text("loader_clear", *loader_clear_arms(rows)) or (
        "No loader setting switched around this config measured a difference."
    )
    said = [claims.text("loader_gain", trial), claims.text("input_limit", trial), evidence]
    section.blocks.append(" ".join(part for part in said if part))
    return section


def loader_clear_arms(rows: pd.DataFrame) -> list[str]:
    """The loader arms (not the all-off one) whose speed interval excludes 1x."""
    if rows.empty:
        return []
    return [
        str(row["arm"])
        for _, row in rows.iterrows()
        if row["arm"] not in (REFERENCE, PLAIN_LOADER)
        and verdict_text(row).split(",")[0] in ("faster", "slower")
    ]


def _rates(row: Mapping[str, Any], wait: float, bound: str, data_bound: str) -> str:
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
        f"for the next batch {wait:.0%} of their time: **{bound}-bound** {data_bound}."
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


def loader_rows(effects: pd.DataFrame) -> pd.DataFrame:
    """The recommended config's row and its loader-knob arms from the controlled effects."""
    if effects.empty:
        return effects
    fields = effects["arm"].astype(str).map(_field_of)
    loader = fields.isin([k.field for k in loader_knobs()]) | (effects["arm"] == PLAIN_LOADER)
    if not loader.any():
        return effects.iloc[0:0]
    return effects[(effects["arm"] == REFERENCE) | loader]
