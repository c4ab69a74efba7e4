"""Section 4: the speed settings the probes chose per training config (the probe cache)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tuner.experiment import Experiment
from tuner.report.claims import Claims
from tuner.report.document import Section, Table
from tuner.techniques import settings_text
from tuner.units import plural

__all__ = ["speed_section"]


def speed_section(experiment: Experiment, claims: Claims) -> Section:
    section = Section("Speed settings chosen per training config", anchor="speed")
    if not experiment.probe_cache:
        section.blocks.append(
            "No speed probes ran (--speed-repeats 0): the speed knobs stayed as the space set them."
        )
        return section
    section.blocks.append(claims.text("probe_budget"))  # the clock's, records
    section.blocks.append(claims.text("machine_load"))
    section.blocks.append(claims.text("rule", "probe_rule"))
    variants = [v for choice in experiment.probe_cache.values() for v in choice.get("variants", [])]
    probed = [v for v in variants if v.get("probed") is not False]
    if variants and not probed:
        section.blocks.append(
            "**No knob was probed**: the probe budget held no knob's pairs, so every knob kept "
            "its default (not probed is not tried and lost). Give the probes a larger share "
            "(--probe-share) or the trials more time, on a quieter machine."
        )
    elif claims.text("probes_say_nothing"):  # no probe's interval says anything
        section.blocks.append(claims.text("probes_say_nothing"))
    section.blocks.append(
        Table(_speed_table(experiment.probe_cache, claims), "Speed probes per key")
    )
    return section


def _speed_table(cache: Mapping[str, Any], claims: Claims) -> pd.DataFrame:
    rows = []
    for key, choice in cache.items():
        fields = json.loads(key)
        norm = fields.get("norm")
        row: dict[str, Any] = {
            "scope": fields.get("scope", "config"),
            "batch size": fields.get("batch_size"),
            "amp": fields.get("amp"),
            "norm": f"{norm} ({plural(int(fields['gn_groups']), 'group')})"
            if norm == "group" and fields.get("gn_groups")
            else norm,
            "pinned": ", ".join(f"{k}={v}" for k, v in (fields.get("pinned") or {}).items()),
            "plain images/s": choice.get("plain_images_per_second"),
        }
        for variant in choice.get("variants", []):
            # the words speed_choice uses (one text for one verdict)
            row[variant["name"]] = claims.text("probe", variant["name"], key)
        chosen = settings_text(choice.get("settings", {}))
        row["chosen"] = "over budget: not probed" if choice.get("over_budget") else chosen
        row["not probed (probe budget)"] = ", ".join(choice.get("not_probed") or []) or "-"
        seconds = choice.get("probe_seconds")  # the clock's tenths: 0.0009685 read as noise
        row["probe seconds"] = round(seconds, 1) if isinstance(seconds, int | float) else None
        rows.append(row)
    return pd.DataFrame(rows)
