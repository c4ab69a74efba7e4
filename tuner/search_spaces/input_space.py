"""The input pipeline: a data-bound JPEG workload, lr and batch size; the loader knobs probed.

Workloads:
- ``cpu``: ``test_resnet`` (timm's smallest ResNet) at 64 px on ``jpeg_digits``, the shipped
  JPEG files (scikit-learn's digits drawn over its two sample photos, 256 px, built once into
  the user cache folder; tuner/engine/jpeg_digits.py). Decoding and cropping a file costs the
  host about as much as the model's step on it, so with ``num_workers=0`` the steps wait for
  data about 40 % of their time: the loader knobs have something to win. 6,400 training images
  per trial (60 s at most), 4 trials: a few minutes on 2 cores.
- ``gpu``: ``resnet50`` at 224 px on the same files (``--data imagefolder:PATH`` for yours).

The space searches what changes training (lr, batch size); the speed probes settle the loader
knobs with the others, per training config: DataLoader workers (as many levels as the trial has
cores), prefetch_factor on top of kept workers, a host prefetch thread, and the JPEG decoder
(PIL or torchvision's decode_jpeg). The report's "Input pipeline" section says whether the
recommended run is data-bound or compute-bound, and what its loader settings measured. Give the
effects time to measure (``--trust-budget 150``: about 11 rounds; the default 25 % gives 3,
whose intervals say nothing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only the type of `trial`: a usage error answers before Optuna loads
    import optuna

from tuner.workloads import GPU_TRIAL

WORKLOADS: dict[str, dict[str, Any]] = {
    "cpu": {
        "model": "test_resnet",
        "data": "jpeg_digits",
        "img_size": 64,
        "epochs": None,
        "images": 6_400,
        "time_budget_s": 60.0,
        "eval_every_images": 3_200,
        "warmup_steps": 3,
    },
    "gpu": {"model": "resnet50", **GPU_TRIAL, "data": "jpeg_digits"},
}
NUM_SAMPLES = {"cpu": 4, "gpu": 16}


def space(trial: optuna.Trial, *, cuda: bool) -> dict[str, Any]:
    """Batch size and lr per reference batch (AdamW; the test ResNet learns at 3e-3..2e-2)."""
    batch_size = trial.suggest_categorical("batch_size", [128, 256] if cuda else [32, 64])
    base_lr = trial.suggest_float("base_lr", 1e-2, 8e-2, log=True)
    return {"batch_size": batch_size, "lr": base_lr * batch_size / 256}
