"""A space whose own model passes the preflight (eval mode) and fails at its third training
step: the trial is recorded as errored, with the user's traceback in its folder."""

from __future__ import annotations

from typing import Any

import optuna
import torch
from torch import nn
from torch.utils.data import TensorDataset

WORKLOADS: dict[str, dict[str, Any]] = {
    "cpu": {"img_size": 8, "epochs": None, "steps": 6, "batch_size": 8, "warmup_steps": 1}
}
NUM_SAMPLES = {"cpu": 1}


class FailsWhileTraining(nn.Module):
    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, num_classes))
        self.steps = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.steps += 1
            if self.steps == 3:
                raise ValueError("my forward failed at step 3")
        return self.head(x)


def build_model(config: Any, num_classes: int) -> nn.Module:
    return FailsWhileTraining(num_classes)


def build_data(config: Any) -> tuple[TensorDataset, TensorDataset, int]:
    images = torch.randint(0, 256, (64, 3, 8, 8), dtype=torch.uint8)
    split = TensorDataset(images, torch.arange(64) % 2)
    return split, split, 2


def space(trial: optuna.Trial, *, cuda: bool) -> dict[str, Any]:
    return {"lr": trial.suggest_float("lr", 1e-3, 1e-2, log=True)}
