"""End-to-end test space: one over-budget batch size and one group count the engine rejects."""

from __future__ import annotations

from typing import Any

import optuna

WORKLOADS: dict[str, dict[str, Any]] = {
    "cpu": {
        "model": "vit_tiny_r_s16_p8_224",
        "model_kwargs": {"patch_size": 2, "embed_dim": 32, "depth": 1, "num_heads": 2},
        "data": "digits",
        "img_size": 32,
        "epochs": None,
        "steps": 8,
        "eval_every_steps": 4,
        "max_eval_batches": 2,
        "warmup_steps": 2,
        "norm": "group",
    },
}
# batch 512 needs ~420 MiB in a fresh process (batch 8: ~180 MiB): over a 300 MiB budget.
# gn_groups=3 does not divide the stem's 64 channels: the engine raises TunerError.
GRID = {"batch_size": [8, 512], "gn_groups": [4, 3]}
NUM_SAMPLES = {"cpu": 4}


def space(trial: optuna.Trial, *, cuda: bool) -> dict[str, Any]:
    batch_size = trial.suggest_categorical("batch_size", GRID["batch_size"])
    gn_groups = trial.suggest_categorical("gn_groups", GRID["gn_groups"])
    return {"batch_size": batch_size, "gn_groups": gn_groups, "lr": 1e-3 * batch_size / 256}
