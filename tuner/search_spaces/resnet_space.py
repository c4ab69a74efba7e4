"""ResNet: BatchNorm vs GroupNorm(groups), lr, batch size and AMP (speed knobs: probed).

Workloads:
- ``cpu``: ``resnet10t`` at 32 px on the embedded digits, 7,680 images per trial (about 20 s).
- ``gpu``: ``resnet50`` at 224 px, 102,400 images per trial (``--data imagefolder:PATH`` for real
  images; the default embedded digits run anywhere).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only the type of `trial`: a usage error answers before Optuna loads
    import optuna

from tuner.techniques import knob
from tuner.workloads import GPU_TRIAL

WORKLOADS: dict[str, dict[str, Any]] = {
    "cpu": {
        "model": "resnet10t",
        "data": "digits",
        "img_size": 32,
        "epochs": None,
        "images": 7_680,
        "time_budget_s": 60.0,
        "eval_every_images": 2_560,
        "warmup_steps": 3,
    },
    "gpu": {"model": "resnet50", **GPU_TRIAL},
}
NUM_SAMPLES = {"cpu": 8, "gpu": 48}


def space(trial: optuna.Trial, *, cuda: bool) -> dict[str, Any]:
    """Norm and its group count, lr per reference batch, mixed precision."""
    norm = trial.suggest_categorical("norm", ["batch", "group"])
    params: dict[str, Any] = {"norm": norm}
    if norm == "group":
        # Every ResNet width (24..2048 channels) is divisible by these.
        params["gn_groups"] = trial.suggest_categorical("gn_groups", [1, 4, 8])
    batch_sizes = [64, 128, 256] if cuda else [32, 64, 128]
    params["batch_size"] = trial.suggest_categorical("batch_size", batch_sizes)
    base_lr = trial.suggest_float("base_lr", 3e-4, 1e-2, log=True)
    params["lr"] = base_lr * params["batch_size"] / 256
    params["amp"] = trial.suggest_categorical("amp", knob("amp").choices(cuda=cuda))
    return params
