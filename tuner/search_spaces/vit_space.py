"""Hybrid ViT (conv stem): BatchNorm vs GroupNorm(groups), lr, batch size and AMP.

Workloads:
- ``cpu`` (a fresh laptop or CI box): a 2-block hybrid ViT at 32 px on the embedded digits,
  6,400 training images per trial whatever its batch size (evaluated every 1,600: four points
  on each accuracy curve, so images to target are known to 1,600),
  8 trials: a few minutes on 2 cores. 20 s of training at most: a safety cap that an fp32
  trial on a quiet machine does not reach (4-7 s; 3x that beside a busy core), while a bf16
  one on a CPU without bf16 arithmetic (about 110 images/s) is cut by it: starved, not
  compared (a longer cap would spend that long on each such trial).
- ``gpu``: ``vit_small_r26_s32_224`` (ResNet-26 stem + ViT-S) at 224 px, 102,400 images per
  trial (``tuner.workloads.GPU_TRIAL``).
  Its data defaults to the embedded digits so it runs anywhere; point it at real images with
  ``--data imagefolder:PATH``.

The space searches what changes training; the accuracy-neutral speed knobs (workers, pinned
memory, set_to_none, channels_last, fused AdamW, the prefetcher, compile) are chosen per
training config by the search's speed probes. Return one of them to pin it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only the type of `trial`: a usage error answers before Optuna loads
    import optuna

from tuner.techniques import knob
from tuner.workloads import DIGITS_TINY_VIT, GPU_TRIAL

WORKLOADS: dict[str, dict[str, Any]] = {
    "cpu": {
        **DIGITS_TINY_VIT,
        "epochs": None,
        "images": 6_400,
        "time_budget_s": 20.0,
        "eval_every_images": 1_600,  # 4 points on each curve: images to target to 1,600
        "warmup_steps": 3,
    },
    "gpu": {"model": "vit_small_r26_s32_224", **GPU_TRIAL},
}
NUM_SAMPLES = {"cpu": 8, "gpu": 48}


def space(trial: optuna.Trial, *, cuda: bool) -> dict[str, Any]:
    """Norm and its group count, lr per reference batch, mixed precision."""
    norm = trial.suggest_categorical("norm", ["batch", "group"])
    params: dict[str, Any] = {"norm": norm}
    if norm == "group":
        # The ResNet stem has 64 channels: every choice divides it.
        params["gn_groups"] = trial.suggest_categorical("gn_groups", [1, 4, 16, 32])
    batch_sizes = [64, 128, 256, 512] if cuda else [32, 64, 128, 256]
    params["batch_size"] = trial.suggest_categorical("batch_size", batch_sizes)
    # lr is searched per 256 images so it carries over when memory forces another batch size.
    base_lr = trial.suggest_float("base_lr", 1e-4, 3e-3, log=True)
    params["lr"] = base_lr * params["batch_size"] / 256
    params["amp"] = trial.suggest_categorical("amp", knob("amp").choices(cuda=cuda))
    return params
