"""Controlled comparisons: arms that differ in one change, measured interleaved, paired deltas.

One mechanism serves the technique ladder of ``tuner bench`` and ``tuner ablate``, the norm
comparison, and the report's technique effects around the recommended config:

1. :func:`plan_ladder` (and the callers' own arms) say what each arm changes and which arm it is
   compared with (its *reference*: the rung before, the plain loop, the recommended config).
2. :func:`run_interleaved` measures every arm ``repeats`` times round-robin (arm 1..N, then
   again), after one discarded warm-up measurement, so a drift of a shared machine hits every
   arm alike and arms of one repeat form a pair.
3. :func:`summarize` gives each arm's median with its interval and, against its reference and
   against the baseline, the paired ratio of images/s and the paired difference of peak memory
   and accuracy, each with its interval and a tie flag (:mod:`tuner.stats`). An arm whose change
   did not take effect on this hardware is marked ``fell_back``, not reported as an effect.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pandas as pd

from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.stats import accuracy_difference, median_interval, paired_difference, paired_ratio
from tuner.techniques import KNOBS, ladder

__all__ = [
    "PLAIN",
    "REFERENCE",
    "Arm",
    "check_repeats",
    "fallbacks",
    "plain_loop",
    "plan_ladder",
    "plan_toggles",
    "run_interleaved",
    "summarize",
]

REFERENCE = "recommended"
PLAIN = "plain loop"

Measure = Callable[[TrainConfig], Any]  # returns a RunResult


@dataclass(frozen=True)
class Arm:
    """One configuration of a comparison.

    Attributes:
        name: unique within the comparison (``+channels_last``, ``groupnorm/8``, ...).
        group: which comparison it belongs to (``ladder``, ``norm``, ``effects``, ...).
        config: what runs.
        changes: the settings this arm changes against its reference (for fallback checks).
        reference: the arm it is compared with (``None``: it is a reference itself).
        baseline: the arm every arm of its group is also compared with.
    """

    name: str
    group: str
    config: TrainConfig
    changes: Mapping[str, Any] = field(default_factory=dict)
    reference: str | None = None
    baseline: str | None = None


def plan_ladder(
    base: TrainConfig,
    *,
    cuda: bool,
    amp: str | None = None,
    skip: Sequence[str] = (),
    autotune: bool = False,
) -> tuple[list[Arm], list[str]]:
    """The technique ladder from the registry as arms: each compared with the rung before.

    Returns:
        The arms (the first is the plain loop, named ``plain``), and the knobs left out
        because this device cannot run them.
    """
    rungs, left_out = ladder(cuda=cuda, amp=amp, skip=skip, autotune=autotune)
    arms: list[Arm] = []
    for rung in rungs:
        previous = arms[-1] if arms else None
        changes = {
            k: v
            for k, v in rung.changes.items()
            if previous is None or previous.config.to_dict()[k] != v
        }
        arms.append(
            Arm(
                rung.name,
                "ladder",
                base.replace(**rung.changes),
                changes,
                previous.name if previous else None,
                "plain",
            )
        )
    return arms, left_out


def plan_toggles(
    config: TrainConfig, *, cuda: bool, skip: Mapping[str, str] | None = None
) -> tuple[list[Arm], list[str]]:
    """Arms around ``config``: itself, each applicable knob of the registry switched the other
    way (one at a time), the other norm choice, and the plain loop. All are compared with
    ``config`` (the arm named :data:`REFERENCE`).

    Args:
        skip: knob fields to leave out, each with the reason shown to the user.

    Returns:
        The arms, and a line per knob left out (skipped, or not runnable on this device).
    """
    skip = skip or {}
    arms = [Arm(REFERENCE, "effects", config)]
    left_out: list[str] = []
    current = config.to_dict()
    for entry in KNOBS:
        if entry.companion or (not entry.cpu and not entry.cuda and entry.field != "norm"):
            continue  # companions move with their knob; batch size and lr are not toggles
        if entry.needs_workers:  # DDP's knobs do nothing in the one process measuring effects
            continue
        if entry.field in skip:
            left_out.append(f"{entry.field}: {skip[entry.field]}")
            continue
        targets = _toggle_targets(entry, current[entry.field], cuda=cuda)
        if entry.field == "norm" and not targets:
            continue  # the model's own norm layers: the space does not compare norms
        if not targets:
            left_out.append(f"{entry.field}: needs CUDA")
        for target in targets:
            changes = entry.settings(target)
            arms.append(
                Arm(
                    _toggle_name(entry.field, target),
                    "effects",
                    config.replace(**changes),
                    changes,
                    REFERENCE,
                )
            )
    plain_changes = plain_loop(config)
    if plain_changes:
        arms.append(
            Arm(PLAIN, "effects", config.replace(**plain_changes), plain_changes, REFERENCE)
        )
    return arms, left_out


def plain_loop(config: TrainConfig) -> dict[str, Any]:
    """The changes that turn every speed technique of ``config`` off (fp32, no workers)."""
    current = config.to_dict()
    changes: dict[str, Any] = {}
    for entry in KNOBS:
        if (entry.accuracy_neutral or entry.in_ladder) and current[entry.field] != entry.off:
            changes.update(entry.settings(entry.off))
    return {k: v for k, v in changes.items() if current[k] != v}


def _toggle_targets(entry: Any, value: Any, *, cuda: bool) -> list[Any]:
    if entry.field == "norm":
        return [v for v in entry.values(cuda=cuda) if v != value] if value != "native" else []
    on = entry.values(cuda=cuda)
    if value == entry.off:
        return list(on[:1])
    return [entry.off, *(v for v in on if v != value and entry.field == "amp")]


def _toggle_name(field_name: str, target: Any) -> str:
    if isinstance(target, bool):
        return f"{'+' if target else '-'}{field_name}"
    return f"{field_name}={target}"


def run_interleaved(
    arms: Sequence[Arm],
    *,
    repeats: int,
    measure: Measure,
    on_run: Callable[[int, Arm, dict[str, Any]], None] | None = None,
    warmup: bool = True,
    drop_invalid: bool = False,
    time_limit_s: float | None = None,
) -> pd.DataFrame:
    """Measure every arm ``repeats`` times, round-robin; one row per measurement.

    A failing measurement (OOM, NaN, crash) is a row with its status, never an exception.
    With ``drop_invalid``, an arm whose config cannot be built (a ``TunerError``, e.g. a group
    count that does not divide) is left out after its first try and listed in
    ``runs.attrs["dropped"]``. With ``time_limit_s``, no repeat starts that would end after it
    (judged by the slowest repeat so far); ``runs.attrs["repeats_done"]`` says how many ran.

    Raises:
        TunerError: ``repeats`` < 1, or (without ``drop_invalid``) an impossible arm.
    """
    check_repeats(repeats)
    started = time.perf_counter()
    if warmup and arms:
        measure(arms[0].config)  # one-time costs (lazy imports, data, allocator) go here
    rows: list[dict[str, Any]] = []
    live, dropped, slowest = list(arms), [], 0.0
    for repeat in range(repeats):
        elapsed = time.perf_counter() - started
        if repeat and time_limit_s is not None and elapsed + slowest > time_limit_s:
            break
        for arm in list(live):
            try:
                result = measure(arm.config)
            except TunerError as exc:
                if not drop_invalid:
                    raise
                live.remove(arm)
                dropped.append(f"{arm.name}: {exc}")
                continue
            rows.append(_row(arm, repeat, result))
            if on_run is not None:
                on_run(repeat, arm, rows[-1])
        slowest = max(slowest, time.perf_counter() - started - elapsed)
    runs = pd.DataFrame(rows)
    runs.attrs["dropped"] = dropped
    runs.attrs["repeats_done"] = int(runs["repeat"].max()) + 1 if len(runs) else 0
    return runs


def check_repeats(repeats: int) -> None:
    """Raises ``TunerError`` unless ``repeats`` >= 1 (found before anything runs)."""
    if repeats < 1:
        raise TunerError(f"--repeats {repeats} must be at least 1 (3 or more to see the spread).")


def summarize(runs: pd.DataFrame, arms: Sequence[Arm] | None = None) -> pd.DataFrame:
    """Per arm: medians with intervals, and paired changes vs its reference and baseline.

    Without ``arms`` they are read back from the runs' ``arm``/``reference``/``baseline``
    columns (a runs file written earlier), in order of appearance.
    """
    specs = (
        [(a.name, a.group, a.reference, a.baseline) for a in arms]
        if arms is not None
        else _specs(runs)
    )
    rows = []
    for name, group, reference, baseline in specs:
        row = _arm_summary(runs, name, group, reference)
        for label, other in (("reference", reference), ("baseline", baseline)):
            row.update(_changes(runs, name, other if other != name else None, label))
        rows.append(row)
    return pd.DataFrame(rows)


def _specs(runs: pd.DataFrame) -> list[tuple[str, str, str | None, str | None]]:
    if runs.empty:
        return []
    first = runs.drop_duplicates("arm")
    return [
        (str(r["arm"]), str(r["group"]), str(r["reference"]) or None, str(r["baseline"]) or None)
        for _, r in first.fillna("").iterrows()
    ]


def _arm_summary(
    runs: pd.DataFrame, name: str, group: str, reference: str | None
) -> dict[str, Any]:
    every = runs[runs["arm"] == name] if not runs.empty else runs
    ok = every[every["status"] == "ok"] if not every.empty else every
    row: dict[str, Any] = {
        "arm": name,
        "group": group,
        "reference": reference or "",
        "repeats_ok": f"{len(ok)}/{len(every)}",
    }
    for column in ("images_per_second", "peak_memory_bytes", "val_accuracy"):
        values = ok[column].tolist() if column in ok else []
        est = median_interval(values)
        row[column], row[f"{column}_low"], row[f"{column}_high"] = est.median, est.low, est.high
    row["memory_kind"] = next(iter(ok["memory_kind"].dropna()), "") if len(ok) else ""
    fell_back = set(every["fell_back"].fillna("")) - {""} if len(every) else set()
    row["fell_back"] = "; ".join(sorted(fell_back))
    failed = set(every.loc[every["status"] != "ok", "status"]) if len(every) else set()
    row["failed"] = "; ".join(sorted(failed))
    return row


def _changes(runs: pd.DataFrame, name: str, other: str | None, label: str) -> dict[str, Any]:
    """Paired changes of arm ``name`` against arm ``other`` (NaN when there is none)."""
    mine, theirs = _paired(runs, name, other) if other else (pd.DataFrame(), pd.DataFrame())
    out: dict[str, Any] = {}
    images = [*theirs.get("val_images", []), *mine.get("val_images", [])]
    specs = (
        ("throughput_ratio", "images_per_second", paired_ratio),
        ("memory_change_bytes", "peak_memory_bytes", paired_difference),
        # Accuracy: the validation set's sampling error counts too (same-seed repeats agree).
        ("accuracy_change", "val_accuracy", partial(accuracy_difference, images=images)),
    )
    for key, column, estimate in specs:
        if other is None or mine.empty:
            out[f"{key}_vs_{label}"] = math.nan
            out[f"{key}_vs_{label}_low"] = out[f"{key}_vs_{label}_high"] = math.nan
            out[f"{key}_vs_{label}_tie"] = True
            continue
        change = estimate(theirs[column].tolist(), mine[column].tolist())
        out[f"{key}_vs_{label}"] = change.value
        out[f"{key}_vs_{label}_low"], out[f"{key}_vs_{label}_high"] = change.low, change.high
        out[f"{key}_vs_{label}_tie"] = change.tie
    return out


def _paired(runs: pd.DataFrame, name: str, other: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ok repeats of both arms, aligned on the repeat index."""
    if runs.empty:
        return runs, runs
    ok = runs[runs["status"] == "ok"]
    mine = ok[ok["arm"] == name].set_index("repeat")
    theirs = ok[ok["arm"] == other].set_index("repeat")
    common = mine.index.intersection(theirs.index)
    return mine.loc[common], theirs.loc[common]


def _row(arm: Arm, repeat: int, result: Any) -> dict[str, Any]:
    r = result.to_dict()
    return {
        "arm": arm.name,
        "group": arm.group,
        "reference": arm.reference or "",
        "baseline": arm.baseline or "",
        "changes": json.dumps(dict(arm.changes), sort_keys=True),
        "repeat": repeat,
        "status": r["status"],
        "images_per_second": _nan(r.get("images_per_second")),
        "step_time_s": _nan(r.get("step_time_s")),
        "peak_memory_bytes": _nan(r.get("peak_memory_bytes")),
        "peak_memory_allocated_bytes": _nan(r.get("peak_memory_allocated_bytes")),
        "memory_kind": r.get("memory_kind") or "",
        "val_accuracy": _nan(r.get("val_accuracy")),
        "val_images": r.get("val_images") or 0,
        "train_loss": _nan(r.get("train_loss")),
        "data_wait_fraction": _nan(r.get("data_wait_fraction")),
        "train_time_s": _nan(r.get("train_time_s")),
        "wall_time_s": _nan(r.get("wall_time_s")),
        "fell_back": "; ".join(fallbacks(arm.changes, r.get("effective", {}), r.get("notes", []))),
        "error": r.get("error") or "",
        "device": r.get("device", ""),
        "device_name": r.get("device_name", ""),
    }


def fallbacks(
    changes: Mapping[str, Any], effective: Mapping[str, Any], notes: list[str]
) -> list[str]:
    """The engine's notes about ``changes`` that did not take effect (what actually ran)."""
    missed = [k for k, v in changes.items() if k in effective and effective[k] != v]
    return [n for n in notes if any(k in n for k in missed)] or [f"{k} not applied" for k in missed]


def _nan(value: Any) -> float:
    return math.nan if value is None else float(value)
