"""Tiny grid-able space (18 configs) for the sampler benchmark: lr x batch x norm, 16 px ViT."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only the type of `trial`: a usage error answers before Optuna loads
    import optuna

from tuner.workloads import MICRO_VIT

WORKLOADS: dict[str, dict[str, Any]] = {
    "cpu": {
        **MICRO_VIT,
        "data": "digits",
        "img_size": 16,
        "epochs": None,
        "images": 1_920,  # 60 steps of 32
        "eval_every_images": 960,
        "warmup_steps": 3,
    },
}
NUM_SAMPLES = {"cpu": 6}
GRID = {
    "base_lr": [3e-4, 1e-3, 3e-3],
    "batch_size": [16, 32, 64],
    "norm": ["batch", "group"],
}


def space(trial: optuna.Trial, *, cuda: bool) -> dict[str, Any]:
    """Every parameter is a categorical from GRID, so GridSampler can cover it."""
    batch_size = trial.suggest_categorical("batch_size", GRID["batch_size"])
    base_lr = trial.suggest_categorical("base_lr", GRID["base_lr"])
    norm = trial.suggest_categorical("norm", GRID["norm"])
    params: dict[str, Any] = {"batch_size": batch_size, "lr": base_lr * batch_size / 256}
    params["norm"] = norm
    if norm == "group":
        params["gn_groups"] = 8  # fixed: not a searched parameter
    return params
