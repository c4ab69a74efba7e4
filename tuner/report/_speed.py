"""Section 4: the speed settings the probes chose per training config (the probe cache)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tuner import record
from tuner.experiment import Experiment
from tuner.report._status import load_text_of
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
    section.blocks.append(_budget_text(experiment))
    section.blocks.append(load_text_of(experiment))
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


def _budget_text(experiment: Experiment) -> str:
    """What the speed probes cost the trials, and the budget they had (from trials.csv)."""
    trials = experiment.trials
    share = (experiment.metadata.get("options") or {}).get("probe_share")
    limit = (
        f"may take at most {share:.0%} of the trials' time"
        if isinstance(share, int | float)
        else "had no bound"
    )
    probe = trials.get(record.SPEED_PROBE_TIME_S, pd.Series(dtype=float)).astype(float).fillna(0)
    wait = trials.get(record.SPEED_PROBE_WAIT_S, pd.Series(dtype=float)).astype(float).fillna(0)
    total = trials.get(record.TRIAL_TIME_S, pd.Series(dtype=float)).astype(float).fillna(0)
    spent, whole = float(probe.sum() + wait.sum()), float(total.sum())
    measured = f"{spent / whole:.0%} ({spent:.0f} s of {whole:.0f} s)" if whole else "not timed"
    unprobed = trials.get(record.SPEED_NOT_PROBED, pd.Series(dtype=str)).fillna("")
    short = int((unprobed.astype(str) != "").sum())
    left = f"; {plural(short, 'trial')} ran with knobs left unprobed" if short else ""
    return (
        f"**Probe budget**: the speed probes {limit} "
        f"(--probe-share); here their share was {measured} of the trials' wall time, waiting "
        f"for another trial's probes included{left}. A knob left unprobed keeps its default: not "
        "probed is not tried and lost."
    )


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
        row["probe seconds"] = choice.get("probe_seconds")
        rows.append(row)
    return pd.DataFrame(rows)
