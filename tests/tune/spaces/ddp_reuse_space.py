"""Data-parallel test space: three trials of 2 ranks each, in the order the start-up design fixes
at seed 4: ``strong``, then ``weak`` (stopped mid-trial by ParetoASHA at its first rung, as in
``ddp_space``), then ``again``, which must run on the warm ranks ``weak`` left."""

from __future__ import annotations

from typing import Any

import optuna

from tuner.workloads import RESNET_CPU_TRIAL

WORKLOADS: dict[str, dict[str, Any]] = {
    # As in ddp_space: 24 steps of weak's global batch of 8, the variants' own budgets.
    "cpu": {**RESNET_CPU_TRIAL, "images": 192, "eval_every_images": 64, "max_eval_batches": 4},
}
NUM_SAMPLES = {"cpu": 3}
VARIANTS: dict[str, dict[str, Any]] = {
    "strong": {"batch_size": 16, "lr": 1e-2, "images": 1024, "eval_every_images": 512},
    "weak": {"batch_size": 4, "img_size": 64, "lr": 1e-9, "model": "resnet18"},
    "again": {"batch_size": 16, "lr": 8e-3, "images": 1024, "eval_every_images": 512},
}


def space(trial: optuna.Trial, *, cuda: bool) -> dict[str, Any]:
    return dict(VARIANTS[trial.suggest_categorical("variant", list(VARIANTS))])
