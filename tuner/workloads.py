"""Named reference workloads, each defined once (for ``tuner bench``, ``tuner ablate``, the GPU
suite, the search spaces and ``bench/``): spread them (``{**MICRO_VIT, ...}``), never change
them in place; :func:`workload` hands out a fresh copy.
"""

from __future__ import annotations

import copy
from typing import Any

from tuner.errors import TunerError

__all__ = [
    "ABLATION",
    "BENCH",
    "DIGITS_TINY_VIT",
    "GPU_NORM_MODEL",
    "GPU_TRIAL",
    "MICRO_BENCH",
    "MICRO_VIT",
    "RESNET_CPU_TRIAL",
    "TINY_VIT",
    "VIT_B16",
    "workload",
]

# The hybrid ViT whose ResNet stem has convolutional norm layers (so a norm swap has something
# to swap). Its stem downsamples 4x; patch 2 gives 4x4 tokens at 32 px.
TINY_VIT: dict[str, Any] = {
    "model": "vit_tiny_r_s16_p8_224",
    "model_kwargs": {"patch_size": 2, "embed_dim": 64, "depth": 2, "num_heads": 2},
}
# One block, 32 wide: the smallest that still runs every code path (smoke spaces, dry runs).
MICRO_VIT: dict[str, Any] = {
    "model": "vit_tiny_r_s16_p8_224",
    "model_kwargs": {"patch_size": 2, "embed_dim": 32, "depth": 1, "num_heads": 2},
}
VIT_B16: dict[str, Any] = {"model": "vit_base_patch16_224", "img_size": 224}
# ViT-B/16 has no convolutional norm layer: on a GPU the norm comparison runs on a hybrid ViT
# whose ResNet-26 backbone has them.
GPU_NORM_MODEL = "vit_small_r26_s32_224"

# The CPU tiny ViT on the embedded digits at 32 px (8x8 images upsampled): a real task in seconds.
DIGITS_TINY_VIT: dict[str, Any] = {**TINY_VIT, "data": "digits", "img_size": 32}

# A search space's GPU trial at 224 px: the embedded digits so it runs anywhere (``--data
# imagefolder:PATH`` for real images), 102,400 images per trial (400 steps of 256), evaluated
# every 25,600, so trials of every batch size are compared after the same images; 5 minutes
# at most (a safety cap: a trial it cuts is starved, not compared). Spaces add the model.
GPU_TRIAL: dict[str, Any] = {
    "data": "digits",
    "img_size": 224,
    "epochs": None,
    "images": 102_400,
    "time_budget_s": 300.0,
    "eval_every_images": 25_600,
    "warmup_steps": 20,
}

# timm's smallest ResNet on the digits, 960 images (30 steps of 32) evaluated twice: a real CNN
# search trial of seconds on a CPU (the test spaces' trial).
RESNET_CPU_TRIAL: dict[str, Any] = {
    "model": "test_resnet",
    "data": "digits",
    "img_size": 32,
    "epochs": None,
    "images": 960,
    "eval_every_images": 480,
    "max_eval_batches": 2,
    "warmup_steps": 2,
    "warmup_fraction": 0.0,
}

# ``tuner ablate``: trained runs, so accuracy changes are visible too.
ABLATION: dict[str, dict[str, Any]] = {
    "cpu": {
        **DIGITS_TINY_VIT,
        "batch_size": 64,
        "lr": 5e-4,  # with 100 steps: about 70% val accuracy, so accuracy changes are visible
        "epochs": None,
        "steps": 100,
        "warmup_steps": 5,
    },
    "gpu": {
        **VIT_B16,
        "data": "synthetic",
        "synthetic_size": 12800,
        "batch_size": 128,
        "num_workers": 8,
        "persistent_workers": True,
        "epochs": None,
        "steps": 120,
        "warmup_steps": 20,
    },
}
# ``tuner bench`` and ``tuner bench --verify``: short probes on synthetic data.
BENCH: dict[str, dict[str, Any]] = {
    "cpu": {
        "model": TINY_VIT["model"],  # as timm builds it (12 blocks), at 32 px
        "img_size": 32,
        "batch_size": 64,
        "data": "synthetic",
        "synthetic_size": 64 * 50,
        "num_classes": 10,
    },
    "gpu": {
        **VIT_B16,
        "batch_size": 256,
        "data": "synthetic",
        "synthetic_size": 256 * 50,
        "num_classes": 1000,
    },
}
# The GPU suite's dry-run stand-in for BENCH: tiny, on a CPU, in seconds.
MICRO_BENCH: dict[str, Any] = {
    **MICRO_VIT,
    "img_size": 32,
    "batch_size": 16,
    "synthetic_size": 64,
    "num_classes": 10,
}


def workload(name: str, *, cuda: bool) -> dict[str, Any]:
    """A fresh copy of the named workload (``ablation``, ``bench``) for a GPU or a CPU."""
    families = {"ablation": ABLATION, "bench": BENCH}
    if name not in families:
        raise TunerError(f"unknown workload {name!r}; choose from {', '.join(families)}.")
    return copy.deepcopy(families[name]["gpu" if cuda else "cpu"])
