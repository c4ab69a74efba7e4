"""Equal wall time: every trial trains 3 s of the training clock, evaluated every 1.5 s, whatever
its batch size (8 or 32): a space that compares settings at equal time instead of equal images."""

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
        "time_budget_s": 3.0,
        "eval_every_s": 1.5,
        "max_eval_batches": 2,
        "warmup_steps": 2,
    },
}
NUM_SAMPLES = {"cpu": 3}


def space(trial: optuna.Trial, *, cuda: bool) -> dict[str, Any]:
    batch_size = trial.suggest_categorical("batch_size", [8, 32])
    base_lr = trial.suggest_float("base_lr", 1e-3, 1e-2, log=True)
    return {"batch_size": batch_size, "lr": base_lr * batch_size / 256}
