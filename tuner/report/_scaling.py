"""The report's "Scaling" section: how far data-parallel trials scale with their world size.

Shown when the finished trials ran at more than one world size (``tuner search --world-size``
across searches, or a space whose ``world_size`` parameter varies):

- images/s by world size: the median over the trials of each world size with its
  interval (:func:`tuner.stats.median_interval`), per worker, and the scaling efficiency: the
  global images/s over N times the smallest world size's per-worker rate (1 = linear);
- what the recommended config gains per added worker, from the trials that ran its settings at
  other world sizes (each with its own measured interval);
- the accuracy at each global batch (world size x per-worker batch): the learning rate follows the
  global batch, so accuracy can move with the world size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tuner.experiment import Experiment
from tuner.record import KIND, TRIAL_ID, is_candidate
from tuner.report.document import Section, Table, estimate_text
from tuner.spaces import WORLD_SIZE_PARAM
from tuner.stats import Estimate, median_interval
from tuner.units import as_number, interval_text

__all__ = ["scaling_section"]

_IPS = "images_per_second"
_SIZE = "world size"  # the column header of the number of data-parallel workers


def scaling_section(
    experiment: Experiment, *, recommended: Mapping[str, Any] | None = None
) -> Section | None:
    """The "Scaling" section, or ``None`` when the usable trials share one world size.

    Args:
        experiment: the experiment read from its folder.
        recommended: the recommended trial's row (``Answer.recommended``), if any.
    """
    trials = _usable(experiment.trials)
    if trials.empty or trials["world_size"].nunique() < 2:
        return None
    by_size = _by_world_size(trials)
    smallest = int(by_size[_SIZE].iloc[0])
    blocks: list[Any] = [
        "Images/s are global (every worker's images over the run's seconds); the efficiency is "
        f"images/s over N x the per-worker rate at world size {smallest} (1.00 = linear; "
        "its interval pairs the ends of both intervals). Trials of all configs are pooled per "
        "world size.",
        Table(_throughput_table(by_size), "Images/s by world size (median [interval])"),
    ]
    if recommended is not None:
        blocks.append(_recommended_gain(experiment, trials, recommended))
    blocks.append(Table(_accuracy_table(experiment, trials), "Validation accuracy by global batch"))
    return Section("Scaling", blocks, anchor="scaling")


def _usable(trials: pd.DataFrame) -> pd.DataFrame:
    """Candidates (ran to their end, ok, within budget) with a throughput and a world size."""
    if "world_size" not in trials.columns or trials.empty:
        return trials.iloc[0:0]
    ok = trials[KIND].astype(str).map(is_candidate) & trials["world_size"].notna()
    ok &= pd.to_numeric(trials[_IPS], errors="coerce").gt(0)
    usable = trials[ok].copy()
    usable["world_size"] = usable["world_size"].astype(int)
    return usable


def _by_world_size(trials: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for size, group in trials.groupby("world_size", sort=True):
        estimate = median_interval(pd.to_numeric(group[_IPS], errors="coerce").tolist())
        rows.append({_SIZE: int(size), "trials": len(group), "estimate": estimate})
    return pd.DataFrame(rows)


def _throughput_table(by_size: pd.DataFrame) -> pd.DataFrame:
    base: Estimate = by_size["estimate"].iloc[0]
    base_size = int(by_size[_SIZE].iloc[0])
    return pd.DataFrame(
        {
            _SIZE: size,
            "trials": count,
            "images/s": estimate.format(",.0f"),
            "per worker": f"{estimate.median / size:,.0f}",
            "scaling efficiency": _efficiency(estimate, size, base, base_size),
        }
        for size, count, estimate in by_size[[_SIZE, "trials", "estimate"]].itertuples(False)
    )


def _efficiency(estimate: Estimate, size: int, base: Estimate, base_size: int) -> str:
    per_base = base.median / base_size
    value = estimate.median / (size * per_base)
    low = estimate.low / (size * base.high / base_size)
    high = estimate.high / (size * base.low / base_size)
    interval = interval_text(low, high)
    return f"{value:.2f} {interval}" if interval else f"{value:.2f}"


def _recommended_gain(
    experiment: Experiment, trials: pd.DataFrame, recommended: Mapping[str, Any]
) -> str | Table:
    """The recommended settings at each world size they ran at, and the gain per worker."""
    tid = str(recommended.get(TRIAL_ID))
    same = trials[[_same_settings(experiment, tid, str(t)) for t in trials[TRIAL_ID]]]
    sizes = sorted(set(same["world_size"]))
    if len(sizes) < 2:
        return (
            f"The recommended config ({tid}) ran at one world size only; run it with another "
            "--world-size (or a space with a `world_size` parameter) to see its own gain "
            "per added worker."
        )
    best = same.sort_values(_IPS, ascending=False).drop_duplicates("world_size")
    best = best.sort_values("world_size")
    first = best.iloc[0]
    rows = []
    for _, row in best.iterrows():
        added = int(row["world_size"]) - int(first["world_size"])
        gain = (as_number(row[_IPS]) - as_number(first[_IPS])) / added if added else math.nan
        rows.append(
            {
                _SIZE: int(row["world_size"]),
                "trial": row[TRIAL_ID],
                "images/s": estimate_text(row, _IPS, ",.0f"),
                "gain per added worker (images/s)": "" if math.isnan(gain) else f"{gain:+,.0f}",
            }
        )
    caption = f"The recommended config's settings ({tid}) at each world size"
    return Table(pd.DataFrame(rows), caption)


def _same_settings(experiment: Experiment, tid: str, other: str) -> bool:
    """Whether two trials ran the same parameters, the world size aside."""
    a, b = experiment.configs.get(tid, {}), experiment.configs.get(other, {})
    ignored = {WORLD_SIZE_PARAM, "seed"}
    keys = (set(a) | set(b)) - ignored
    return bool(a) and all(a.get(k) == b.get(k) for k in keys if k in experiment.param_names)


def _accuracy_table(experiment: Experiment, trials: pd.DataFrame) -> pd.DataFrame:
    batch = _global_batch(experiment, trials)
    rows = []
    for (size, global_batch), group in trials.assign(_batch=batch).groupby(
        ["world_size", "_batch"], sort=True
    ):
        accuracy = pd.to_numeric(group["val_accuracy"], errors="coerce")
        rows.append(
            {
                "global batch": int(global_batch),
                _SIZE: int(size),
                "trials": len(group),
                "val accuracy": median_interval(accuracy.tolist()).format(".3f"),
                "best": f"{accuracy.max():.3f}",
            }
        )
    return pd.DataFrame(rows)


def _global_batch(experiment: Experiment, trials: pd.DataFrame) -> pd.Series:
    """Images per optimizer step: the engine's ``global_batch_size``, else world size x batch."""
    per_worker = [
        as_number(experiment.configs.get(str(t), {}).get("batch_size")) for t in trials[TRIAL_ID]
    ]
    derived = trials["world_size"] * pd.Series(per_worker, index=trials.index)
    if "global_batch_size" in trials.columns:
        return pd.to_numeric(trials["global_batch_size"], errors="coerce").fillna(derived)
    return derived
