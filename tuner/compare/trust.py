"""The measurements that make a search's figures trustworthy, run after its trials (no Ray here).

- :func:`remeasure`: trials that ran side by side (or shared a GPU) measured each other's
  interference, and one figure per trial carries the machine's noise. The top candidates run
  again alone, round-robin (A, B, C, A, B, C, ...; :func:`tuner.compare.interleave`), each
  measurement a fresh build (:func:`tuner.engine.probe`), after one discarded warm-up. From
  ``min_repeats`` on, it stops as soon as every two candidates adjacent in speed are
  :func:`separated` (the paired ratio's interval excludes 1x) and otherwise goes on to
  ``max_repeats``; candidates still inseparable then are ties.
- :func:`effects`: starting from the recommended config, every applicable knob of the registry
  switched the other way one at a time (and the other norm choice), plus the plain loop, each a
  fresh short probe interleaved with the recommended config itself and repeated
  (:func:`tuner.compare.plan_toggles`, :func:`tuner.compare.run_interleaved`). torch.compile is
  left out on a CPU unless the recommended config uses it: each compiled build costs tens of
  seconds there, more than the whole comparison.

:mod:`tuner.search.after_search` runs both in a Ray task holding a trial's CPUs and a whole GPU.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pandas as pd

from tuner.compare import interleave, paired, plan_toggles, run_interleaved
from tuner.config import TrainConfig
from tuner.stats import paired_ratio

__all__ = ["effects", "remeasure", "separated"]

_COMPILE_ON_CPU = "left out on cpu, where each compiled build costs tens of seconds"


def remeasure(
    configs: Sequence[TrainConfig], *, steps: int, min_repeats: int, max_repeats: int
) -> list[dict[str, Any]]:
    """Probe ``configs`` round-robin until they separate; one row per measurement, its
    ``candidate`` the index into ``configs``."""
    from tuner.engine import probe

    rows: list[dict[str, Any]] = []

    def record(repeat: int, index: int, result: Any) -> None:
        rows.append({"candidate": index, "repeat": repeat, **_row(result)})

    def unresolved(repeat: int, _slowest: float) -> bool:
        return repeat < max(min_repeats, 1) or not separated(pd.DataFrame(rows))

    interleave(
        range(len(configs)),
        repeats=max_repeats,
        measure=lambda index: probe(configs[index], steps=steps),
        on_run=record,
        warmup=[0] if configs else [],  # the process's one-time start-up
        keep_going=unresolved,
    )
    return rows


def separated(runs: pd.DataFrame, *, by: str = "candidate") -> bool:
    """Whether every two candidates adjacent in median speed are told apart by their paired
    ratio of images/s (the finished repeats of both, paired by repeat)."""
    if runs.empty:
        return True
    ok = runs[runs["status"] == "ok"]
    speed = ok.groupby(by)["images_per_second"].median()
    order = runs[by].drop_duplicates().sort_values(key=lambda c: c.map(speed).fillna(0.0))
    for slow, fast in itertools.pairwise(order):
        a, b = paired(runs, slow, fast, by=by)
        ratio = paired_ratio(a["images_per_second"].tolist(), b["images_per_second"].tolist())
        if not ratio.separated:
            return False
    return True


def effects(
    base: TrainConfig, *, cuda: bool, steps: int, repeats: int
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Measure the arms around ``base`` (the recommended config), interleaved.

    Returns:
        Every measurement (one row each), and ``{"arms", "left_out", "dropped"}`` for the
        experiment's metadata.
    """
    from tuner.engine import probe

    skip = {} if cuda or base.compile != "off" else {"compile": _COMPILE_ON_CPU}
    arms, left_out = plan_toggles(base, cuda=cuda, skip=skip)
    runs = run_interleaved(
        arms, repeats=repeats, measure=lambda c: probe(c, steps=steps), drop_invalid=True
    )
    info = {
        "arms": [a.name for a in arms],
        "left_out": left_out,
        "dropped": list(runs.attrs.get("dropped", [])),
    }
    return runs, info


def _row(result: Any) -> dict[str, Any]:
    return {
        "status": result.status,
        "images_per_second": result.images_per_second,
        "images_per_second_low": result.images_per_second_low,
        "images_per_second_high": result.images_per_second_high,
        "step_time_s": result.step_time_s,
        "peak_memory_bytes": result.peak_memory_bytes,
        "memory_kind": result.memory_kind,
        "measured_steps": result.measured_steps,
        "device": result.device,
        "error": result.error or "",
    }
