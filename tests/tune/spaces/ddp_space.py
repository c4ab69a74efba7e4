"""Data-parallel test space: three trials of 2 workers each, in an order the start-up design fixes.

- ``strong``: a tiny ResNet that learns: trains to the end (the test kills one of its workers
  after its first checkpointed report; it resumes from there);
- ``weak``: ResNet-18 at 64 px, batch 4 (many times slower: more than load can swing two trials
  measured apart) that cannot learn (lr 1e-9): dominated at its first evaluation, so early
  stopping ends it (its workers' placement group must not outlive it);
- ``strong2``: like ``strong`` at batch 64, on ONE worker (the space's ``world_size`` parameter):
  its worker starts after ``weak`` was stopped, and the report gets two world sizes.
"""

from __future__ import annotations

from typing import Any

import optuna

from tuner.workloads import RESNET_CPU_TRIAL

WORKLOADS: dict[str, dict[str, Any]] = {
    # 24 steps of weak's global batch of 8 (2 workers x 4), a report every 8: the budgets are
    # the variants' own (scenarios of the machinery, each with the steps it needs).
    "cpu": {**RESNET_CPU_TRIAL, "images": 192, "eval_every_images": 64, "max_eval_batches": 4},
}
NUM_SAMPLES = {"cpu": 3}
VARIANTS: dict[str, dict[str, Any]] = {
    # 6 reports (time to kill a worker), the first after 16 steps: it has learned by the rung
    "strong": {"batch_size": 16, "lr": 1e-2, "images": 3072, "eval_every_images": 512},
    "weak": {"batch_size": 4, "img_size": 64, "lr": 1e-9, "model": "resnet18"},
    # Batch 64 (faster) and one evaluation, at its end: ahead of both at the first rung.
    "strong2": {"batch_size": 64, "lr": 8e-3, "images": 1536, "eval_every_images": 1536},
}


def space(trial: optuna.Trial, *, cuda: bool) -> dict[str, Any]:
    variant = trial.suggest_categorical("variant", list(VARIANTS))
    if variant == "strong2":
        trial.suggest_int("world_size", 1, 1)  # the world size as a parameter (search-only)
    return dict(VARIANTS[variant])
