"""Resume test space: tiny ViT trials of a few seconds each, sampled by TPE."""

from __future__ import annotations

from typing import Any

import optuna

from tuner.workloads import MICRO_VIT

WORKLOADS: dict[str, dict[str, Any]] = {
    "cpu": {
        **MICRO_VIT,
        "data": "digits",
        "img_size": 16,
        "epochs": None,
        "images": 240,  # 20 steps of 12, the mean batch
        "eval_every_images": 120,
        "max_eval_batches": 2,
        "warmup_steps": 2,
    },
}
NUM_SAMPLES = {"cpu": 3}


def space(trial: optuna.Trial, *, cuda: bool) -> dict[str, Any]:
    batch_size = trial.suggest_categorical("batch_size", [8, 16])
    base_lr = trial.suggest_float("base_lr", 1e-4, 1e-2, log=True)
    return {"batch_size": batch_size, "lr": base_lr * batch_size / 256}
