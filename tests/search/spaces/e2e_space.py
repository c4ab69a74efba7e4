"""End-to-end test space: five trials with known fates, run in this order by the start-up design.

- ``strong``: batch 32, a working lr: trains to the end;
- ``weak``: batch 8 (slower) and a tiny lr (no better accuracy): dominated at the first
  evaluation, so early stopping ends it;
- ``strong2``: the same training config as ``strong`` but another lr: reuses its speed probes;
- ``over``: batch 512, over a 50 MiB budget: rejected by its first steps;
- ``bad``: ``num_classes=5`` for the 10 digit classes: the engine raises inside the trial (no
  driver check covers it), recorded as an error and not retried.
"""

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
        "gn_groups": 4,
    },
}
NUM_SAMPLES = {"cpu": 5}
VARIANTS = {
    "strong": {"batch_size": 32, "lr": 3e-3},
    "weak": {"batch_size": 8, "lr": 1e-7},
    "strong2": {"batch_size": 32, "lr": 2e-3},
    "over": {"batch_size": 512, "lr": 1e-3},
    "bad": {"batch_size": 32, "lr": 1e-3, "num_classes": 5},
}


def space(trial: optuna.Trial, *, cuda: bool) -> dict[str, Any]:
    return dict(VARIANTS[trial.suggest_categorical("variant", list(VARIANTS))])
