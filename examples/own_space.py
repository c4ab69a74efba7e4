"""Your own model and data: a small CNN of your own (BatchNorm2d) on a Dataset class of your own.

`python -m tuner search examples/own_space.py` tunes it like any built-in workload: the norm knob
swaps its BatchNorm2d layers, the speed probes, the memory budget, early stopping and DDP trials
(a space's world_size) all act on it. `tuner train --model examples/own_space.py:build_model
--data examples/own_space.py:build_data` runs one config of it.
"""

from __future__ import annotations

from typing import Any

import optuna
import torch
from torch import nn
from torch.utils.data import Dataset

from tuner import TrainConfig

CLASSES = 4
SIDE = 16  # pixels


class Stripes(Dataset):
    """Grey images with a bright stripe whose orientation and position is the class: a task
    that needs convolutions, made from a seed (nothing to download). Items are (uint8
    [1, SIDE, SIDE] image, int label), like images read from files."""

    def __init__(self, size: int, *, seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, CLASSES, (size,), generator=gen)
        noise = torch.randint(0, 60, (size, 1, SIDE, SIDE), generator=gen)
        self.images = noise.to(torch.uint8)
        for i, label in enumerate(self.labels.tolist()):
            where = slice(2, 6) if label % 2 == 0 else slice(10, 14)
            if label < 2:
                self.images[i, 0, where, :] = 220  # horizontal stripe, top or bottom
            else:
                self.images[i, 0, :, where] = 220  # vertical stripe, left or right

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.images[index], int(self.labels[index])


class SmallNet(nn.Module):
    """Two conv blocks with BatchNorm2d, then a linear classifier."""

    def __init__(self, num_classes: int, width: int = 16) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1, bias=False),
            nn.BatchNorm2d(2 * width),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(2 * width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def build_model(config: TrainConfig, num_classes: int, width: int = 16) -> nn.Module:
    """The model for one run (`model_kwargs` arrive as keywords: `{"width": 8}`)."""
    return SmallNet(num_classes, width=width)


def build_data(config: TrainConfig) -> tuple[Dataset, Dataset, int, dict[str, Any]]:
    """Train and validation splits, the classes, and the normalization to apply on the device."""
    train, val = Stripes(512, seed=0), Stripes(128, seed=1)
    return train, val, CLASSES, {"mean": [0.2], "std": [0.3]}


# The budget in images, not steps: the space samples the batch size, and trials of every batch
# size are compared after the same images (a step budget with a sampled batch is refused).
_RUN = {
    "img_size": SIDE,
    "epochs": None,
    # 24 steps of 24 (the mean batch) on each of 2 data-parallel workers: the images are every
    # worker's together, and 576 left a 2-worker trial below chance (0.19 on 4 classes).
    "images": 1_152,
    "eval_every_images": 576,
    "warmup_steps": 2,
}
WORKLOADS: dict[str, dict[str, Any]] = {"cpu": _RUN, "gpu": {**_RUN, "images": 4_800}}
NUM_SAMPLES = {"cpu": 4, "gpu": 16}


def space(trial: optuna.Trial, *, cuda: bool) -> dict[str, Any]:
    """The norm of the conv blocks (BatchNorm2d as written, or swapped to GroupNorm), the
    width, the batch size and the lr per 256 images."""
    norm = trial.suggest_categorical("norm", ["native", "group"])
    params: dict[str, Any] = {"norm": norm}
    if norm == "group":
        params["gn_groups"] = trial.suggest_categorical("gn_groups", [4, 8])
    params["model_kwargs"] = {"width": trial.suggest_categorical("width", [8, 16])}
    params["batch_size"] = trial.suggest_categorical("batch_size", [16, 32])
    base_lr = trial.suggest_float("base_lr", 3e-3, 3e-2, log=True)
    params["lr"] = base_lr * params["batch_size"] / 256
    return params
