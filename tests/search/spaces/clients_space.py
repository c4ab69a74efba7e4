"""One trial of each kind (test_clients.py), in an order the start-up design fixes: ``ok``
trains to the end; ``weak`` (ResNet-18, lr 1e-9) is slower and learns nothing, so ParetoASHA
stops it at its first evaluation; ``over`` (batch 1024) is over a 220 MiB budget; ``blowup``
(lr 1e6) diverges; ``bad`` (5 classes for 10 digits) raises inside the engine."""

from __future__ import annotations

from typing import Any

import optuna

from tuner.workloads import RESNET_CPU_TRIAL

WORKLOADS: dict[str, dict[str, Any]] = {"cpu": RESNET_CPU_TRIAL}
NUM_SAMPLES = {"cpu": 5}
VARIANTS: dict[str, dict[str, Any]] = {
    "ok": {"batch_size": 32, "lr": 1e-2},
    "weak": {"batch_size": 32, "lr": 1e-9, "model": "resnet18"},
    "over": {"batch_size": 1024, "lr": 1e-3},
    "blowup": {"batch_size": 32, "lr": 1e6},
    "bad": {"batch_size": 32, "lr": 1e-3, "num_classes": 5},
}


def space(trial: optuna.Trial, *, cuda: bool) -> dict[str, Any]:
    return dict(VARIANTS[trial.suggest_categorical("variant", list(VARIANTS))])
