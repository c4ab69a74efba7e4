"""An experiment made of numbers (no search, no folder), spelled once for the tests of the
answer's and the report's words: trials given as rows, re-measurements as runs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tuner.experiment import Experiment, typed_trials

COLUMNS = ("trial_id", "kind", "images_per_second", "val_accuracy", "val_images", "starved_by")


def built_experiment(rows: list[tuple], runs: dict[str, list[float]]) -> Experiment:
    """``rows``: (trial_id, kind, images/s, val accuracy, val images[, starved_by]);
    ``runs``: each re-measured trial's images/s per round. Batch 16, base_lr searched only."""
    width = max(len(row) for row in rows)
    rows = [(*row, *[None] * (width - len(row))) for row in rows]
    trials = typed_trials(pd.DataFrame(rows, columns=list(COLUMNS[:width])))
    remeasure = pd.DataFrame(
        [(tid, r, "ok", ips) for tid, values in runs.items() for r, ips in enumerate(values)],
        columns=["trial_id", "repeat", "status", "images_per_second"],
    )
    configs = {row[0]: {"batch_size": 16, "base_lr": 0.1} for row in rows}
    workload = {"model": "vit_tiny_patch16_224", "data": "synthetic", "img_size": 32}
    metadata = {"objective": "pareto", "workload": workload, "search_only_params": ["base_lr"]}
    return Experiment("e", Path("."), metadata, trials, configs, [], [], remeasure)
