"""Smoke test: a one-block hybrid ViT at 16 px, 480 images per trial (about a minute on 2 CPUs)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only the type of `trial`: a usage error answers before Optuna loads
    import optuna

from tuner.workloads import MICRO_VIT

_TINY_VIT = {
    **MICRO_VIT,
    "data": "digits",
    "img_size": 16,
    "epochs": None,
    "images": 480,
    "eval_every_images": 240,
    "max_eval_batches": 2,
    "warmup_steps": 2,
}
WORKLOADS: dict[str, dict[str, Any]] = {"cpu": _TINY_VIT, "gpu": _TINY_VIT}
NUM_SAMPLES = {"cpu": 4, "gpu": 4}


def space(trial: optuna.Trial, *, cuda: bool) -> dict[str, Any]:
    """Norm (and groups), batch size and lr per reference batch."""
    norm = trial.suggest_categorical("norm", ["batch", "group"])
    params: dict[str, Any] = {"norm": norm}
    if norm == "group":
        params["gn_groups"] = trial.suggest_categorical("gn_groups", [4, 16])
    params["batch_size"] = trial.suggest_categorical("batch_size", [16, 64])
    base_lr = trial.suggest_float("base_lr", 3e-4, 3e-3, log=True)
    params["lr"] = base_lr * params["batch_size"] / 256
    return params
