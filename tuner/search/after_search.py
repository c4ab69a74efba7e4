"""After the trials: re-measure the top candidates and the technique effects, in Ray tasks.

The measuring is :mod:`tuner.compare.trust` (the one interleaving loop and pairing, no Ray);
here each runs in one Ray task holding a trial's CPUs and a whole GPU, so nothing else shares
the device, and its rows become ``remeasure.csv`` and ``effects.csv``.
"""

from __future__ import annotations

import csv
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from tuner.record import TRIAL_ID

__all__ = ["REMEASURE_COLUMNS", "measure_effects", "remeasure", "write_remeasure_csv"]

REMEASURE_COLUMNS = [
    TRIAL_ID,
    "rank",
    "repeat",
    "status",
    "images_per_second",
    "images_per_second_low",
    "images_per_second_high",
    "step_time_s",
    "peak_memory_bytes",
    "memory_kind",
    "measured_steps",
    "device",
    "error",
]


def remeasure(
    candidates: Sequence[tuple[str, dict[str, Any]]],
    *,
    steps: int,
    min_repeats: int,
    max_repeats: int,
    num_cpus: float,
    threads: int,
    num_gpus: float,
    device: str,
    search_only: Collection[str],
) -> list[dict[str, Any]]:
    """Re-measure ``(trial_id, trial config)`` pairs in one Ray task; one row per repeat."""
    import ray

    task = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)(_remeasure)
    configs = [config for _, config in candidates]
    rows = ray.get(
        task.remote(configs, steps, min_repeats, max_repeats, device, threads, sorted(search_only))
    )
    return [
        {TRIAL_ID: candidates[row["candidate"]][0], "rank": row["candidate"] + 1, **row}
        for row in rows
    ]


def write_remeasure_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=REMEASURE_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def measure_effects(
    config: dict[str, Any],
    *,
    steps: int,
    repeats: int,
    num_cpus: float,
    num_gpus: float,
    threads: int,
    device: str,
    search_only: Collection[str],
    out: Path,
) -> dict[str, Any]:
    """Measure the arms around ``config`` (a trial's config) in one Ray task; write ``out``.

    Returns:
        ``{"arms": [...], "left_out": [...], "dropped": [...]}`` for the experiment metadata.
    """
    import pandas as pd
    import ray

    task = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)(_effects)
    rows, info = ray.get(task.remote(config, steps, repeats, device, threads, sorted(search_only)))
    pd.DataFrame(rows).to_csv(out, index=False)
    return info


def _remeasure(
    configs: list[dict[str, Any]],
    steps: int,
    min_repeats: int,
    max_repeats: int,
    device: str,
    threads: int,
    search_only: list[str],
) -> list[dict[str, Any]]:
    from tuner.compare import trust

    train_configs = [_train_config(c, device, threads, search_only) for c in configs]
    return trust.remeasure(
        train_configs, steps=steps, min_repeats=min_repeats, max_repeats=max_repeats
    )


def _effects(
    config: dict[str, Any],
    steps: int,
    repeats: int,
    device: str,
    threads: int,
    search_only: list[str],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from tuner.compare import trust
    from tuner.engine.build import resolve_device

    base = _train_config(config, device, threads, search_only)
    cuda = resolve_device(base.device).type == "cuda"
    runs, info = trust.effects(base, cuda=cuda, steps=steps, repeats=repeats)
    return runs.to_dict(orient="records"), info


def _train_config(params: dict[str, Any], device: str, threads: int, search_only: list[str]) -> Any:
    """A trial's config as this task runs it (on its CPU threads; on the CPU where asked)."""
    import torch

    from tuner.spaces import train_config_of

    torch.set_num_threads(max(1, threads))
    return train_config_of(params, device=device, search_only=search_only)
