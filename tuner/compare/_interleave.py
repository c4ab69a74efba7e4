"""The one interleaving loop (A, B, A, B, ...) and the one pairing by repeat."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pandas as pd

from tuner.compare._arms import Arm
from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.units import as_number

__all__ = ["check_repeats", "interleave", "run_interleaved"]

T = TypeVar("T")
R = TypeVar("R")


def interleave(
    arms: Sequence[T],
    *,
    repeats: int,
    measure: Callable[[T], R | None],
    on_run: Callable[[int, T, R], None] | None = None,
    warmup: Sequence[T] = (),
    keep_going: Callable[[int, float], bool] | None = None,
) -> int:
    """Every arm once per round for up to ``repeats`` rounds; the rounds run. ``measure``
    returning ``None`` drops the arm; ``warmup`` arms are measured first and dropped (one-time
    costs land there; their time is the first estimate of a round's); ``keep_going(repeat,
    slowest round s)``, asked before each round, ends the loop with False."""
    started = time.perf_counter()
    for arm in warmup:
        measure(arm)
    slowest, live, done = time.perf_counter() - started, list(arms), 0
    for repeat in range(repeats):
        if keep_going is not None and not keep_going(repeat, slowest):
            break
        round_started = time.perf_counter()
        for arm in list(live):
            result = measure(arm)
            if result is None:
                live.remove(arm)
            elif on_run is not None:
                on_run(repeat, arm, result)
        slowest, done = max(slowest, time.perf_counter() - round_started), repeat + 1
    return done


def run_interleaved(
    arms: Sequence[Arm],
    *,
    repeats: int,
    measure: Callable[[TrainConfig], Any],  # returns a RunResult
    on_run: Callable[[int, Arm, dict[str, Any]], None] | None = None,
    warmup: bool = True,
    drop_invalid: bool = False,
    time_limit_s: float | None = None,
) -> pd.DataFrame:
    """Every arm ``repeats`` times with :func:`interleave` (``measure``, or the arm's own); a
    row per run, a failed one with its status. ``drop_invalid``: an arm that cannot be built is
    left out (``attrs["dropped"]``), else it raises; ``time_limit_s``: no repeat after the first
    starts that would end after it (``attrs["repeats_done"]``)."""
    check_repeats(repeats)
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    dropped: list[str] = []

    def one(arm: Arm) -> Any:
        try:
            return (arm.measure or measure)(arm.config)
        except TunerError as exc:
            if not drop_invalid:
                raise
            dropped.append(f"{arm.name}: {exc}")
            return None

    def record(repeat: int, arm: Arm, result: Any) -> None:
        rows.append(measurement_row(arm, repeat, result))
        if on_run is not None:
            on_run(repeat, arm, rows[-1])

    def in_time(repeat: int, slowest: float) -> bool:
        elapsed = time.perf_counter() - started
        return not repeat or time_limit_s is None or elapsed + slowest <= time_limit_s

    if warmup and arms:
        # Outside the loop: an impossible first arm raises here.
        (arms[0].measure or measure)(arms[0].config)
    done = interleave(arms, repeats=repeats, measure=one, on_run=record, keep_going=in_time)
    runs = pd.DataFrame(rows)
    runs.attrs["dropped"] = dropped
    runs.attrs["repeats_done"] = done if len(runs) else 0
    return runs


def check_repeats(repeats: int) -> None:
    if repeats < 1:
        raise TunerError(f"--repeats {repeats} must be at least 1 (3 or more to see the spread).")


def measurement_row(arm: Arm, repeat: int, result: Any) -> dict[str, Any]:
    """One measurement of ``arm`` (a RunResult) as a row of a comparison's runs table."""
    r = result.to_dict()
    # What did not take effect: the engine's notes about it, else its name.
    effective = r.get("effective", {})
    missed = [k for k, v in arm.changes.items() if k in effective and effective[k] != v]
    notes = [n for n in r.get("notes", []) if any(k in n for k in missed)]
    return {
        "arm": arm.name,
        "group": arm.group,
        "reference": arm.reference or "",
        "baseline": arm.baseline or "",
        "changes": json.dumps(dict(arm.changes), sort_keys=True),
        "repeat": repeat,
        "status": r["status"],
        "images_per_second": as_number(r.get("images_per_second")),
        "step_time_s": as_number(r.get("step_time_s")),
        "peak_memory_bytes": as_number(r.get("peak_memory_bytes")),
        "peak_memory_allocated_bytes": as_number(r.get("peak_memory_allocated_bytes")),
        "memory_kind": r.get("memory_kind") or "",
        "val_accuracy": as_number(r.get("val_accuracy")),
        "val_images": r.get("val_images") or 0,
        "train_loss": as_number(r.get("train_loss")),
        "data_wait_fraction": as_number(r.get("data_wait_fraction")),
        "train_time_s": as_number(r.get("train_time_s")),
        "wall_time_s": as_number(r.get("wall_time_s")),
        "fell_back": "; ".join(notes or [f"{k} not applied" for k in missed]),
        "error": r.get("error") or "",
        "device": r.get("device", ""),
        "device_name": r.get("device_name", ""),
    }
