"""The report's "Scaling" section, shown when the finished trials ran at more than one world
size: images/s by world size and the scaling efficiency, what the recommended settings gain per
added worker, and the accuracy by global batch (the lr follows the global batch, so accuracy can
move with the world size).
"""

from __future__ import annotations

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
    """The "Scaling" section, or ``None`` when the usable trials share one world size;
    ``recommended`` is the recommended trial's row (``Answer.recommended``), if any."""
    trials = _usable(experiment.trials)
    if trials.empty or trials["world_size"].nunique() < 2:
        return None
    smallest = trials["world_size"].min()
    blocks: list[Any] = [
        "Images/s are global (every worker's images over the run's seconds); the efficiency is "
        f"images/s over N x the per-worker rate at world size {smallest} (1.00 = linear; "
        "its interval pairs the ends of both intervals). Trials of all configs are pooled per "
        "world size.",
        Table(_throughput_table(trials), "Images/s by world size (median [interval])"),
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


def _throughput_table(trials: pd.DataFrame) -> pd.DataFrame:
    by_size = {
        int(size): (len(group), median_interval(group[_IPS].tolist()))
        for size, group in trials.groupby("world_size", sort=True)
    }
    base_size, (_, base) = next(iter(by_size.items()))  # the smallest world size
    return pd.DataFrame(
        {
            _SIZE: size,
            "trials": count,
            "images/s": estimate.format(",.0f"),
            "per worker": f"{estimate.median / size:,.0f}",
            "scaling efficiency": _efficiency(estimate, size, base, base_size),
        }
        for size, (count, estimate) in by_size.items()
    )


def _efficiency(estimate: Estimate, size: int, base: Estimate, base_size: int) -> str:
    """Images/s over ``size`` x the base's per-worker rate, its interval from opposite ends."""
    value = estimate.median / (size * base.median / base_size)
    low = estimate.low / (size * base.high / base_size)
    high = estimate.high / (size * base.low / base_size)
    return f"{value:.2f} {interval_text(low, high)}".rstrip()


def _recommended_gain(
    experiment: Experiment, trials: pd.DataFrame, recommended: Mapping[str, Any]
) -> str | Table:
    """The recommended settings at each world size they ran at, and the gain per worker."""
    tid = str(recommended.get(TRIAL_ID))
    same = trials[[_same_settings(experiment, tid, str(t)) for t in trials[TRIAL_ID]]]
    if same["world_size"].nunique() < 2:
        return (
            f"The recommended config ({tid}) ran at one world size only; run it with another "
            "--world-size (or a space with a `world_size` parameter) to see its own gain "
            "per added worker."
        )
    fastest = same.sort_values(_IPS, ascending=False).drop_duplicates("world_size")
    best = fastest.sort_values("world_size")  # each world size's fastest run of the settings
    first = best.iloc[0]
    rows = []
    for _, row in best.iterrows():
        added = int(row["world_size"]) - int(first["world_size"])
        gain = f"{(row[_IPS] - first[_IPS]) / added:+,.0f}" if added else ""
        rows.append(
            {
                _SIZE: int(row["world_size"]),
                "trial": row[TRIAL_ID],
                "images/s": estimate_text(row, _IPS, ",.0f"),
                "gain per added worker (images/s)": gain,
            }
        )
    caption = f"The recommended config's settings ({tid}) at each world size"
    return Table(pd.DataFrame(rows), caption)


def _same_settings(experiment: Experiment, tid: str, other: str) -> bool:
    """Whether two trials ran the same parameters, the world size aside."""
    a, b = experiment.configs.get(tid, {}), experiment.configs.get(other, {})
    keys = [k for k in experiment.param_names if k not in (WORLD_SIZE_PARAM, "seed")]
    return bool(a) and all(a.get(k) == b.get(k) for k in keys)


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
