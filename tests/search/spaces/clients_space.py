"""Client consistency test space: one trial of each kind, in an order the start-up design fixes.

- ``ok``: a tiny ResNet, batch 32, a working lr: trains to the end;
- ``weak``: ResNet-18 (several times slower) that cannot learn (lr 1e-9): dominated at the
  first evaluation, so ParetoASHA stops it early;
- ``over``: batch 1024, over a 220 MiB budget: rejected by its first steps;
- ``blowup``: an lr of 1e6: the loss turns non-finite, the run diverges;
- ``bad``: ``num_classes=5`` for the 10 digit classes: the engine raises inside the trial (no
  driver check covers it), an error that no retry can fix.
"""

from __future__ import annotations

from typing import Any

import optuna

WORKLOADS: dict[str, dict[str, Any]] = {
    "cpu": {
        "model": "test_resnet",
        "data": "digits",
        "img_size": 32,
        "epochs": None,
        "steps": 30,
        "eval_every_steps": 15,
        "max_eval_batches": 2,
        "warmup_steps": 2,
        "warmup_fraction": 0.0,
    },
}
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
