"""Tiny, fast configs for engine tests: real models and real training steps, seconds each."""

from __future__ import annotations

from typing import Any

from tuner.config import TrainConfig
from tuner.workloads import MICRO_VIT

# A hybrid ViT (ResNetV2 stem with GroupNormAct + transformer) and a ResNet (BatchNorm2d).
TINY_VIT: dict[str, Any] = {**MICRO_VIT, "img_size": 32}
TINY_RESNET: dict[str, Any] = {"model": "test_resnet", "model_kwargs": {}, "img_size": 32}


def tiny(**overrides: Any) -> TrainConfig:
    """A few steps of the tiny hybrid ViT on digits, on CPU."""
    params: dict[str, Any] = {
        **TINY_VIT,
        "batch_size": 32,
        "epochs": None,
        "steps": 3,
        "warmup_steps": 1,
        "max_eval_batches": 2,
        "device": "cpu",
    }
    return TrainConfig(**{**params, **overrides})
