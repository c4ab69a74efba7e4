"""A search from Python, as in a notebook: the model, the dataset and the space are defined right
here (not in an importable module), and `tuner.search` runs them through Ray.

    python examples/notebook_search.py --smoke-test            # 2 trials, a minute on 2 CPUs
    python examples/notebook_search.py --world-size 2          # each trial DDP on 2 workers

Objects defined in a notebook travel to Ray's workers by value (cloudpickle), with the search's
trials; whatever they import must be installed on every node.
"""

from __future__ import annotations

import argparse
from typing import Any, ClassVar

import numpy as np
import torch
from PIL import Image
from torch import nn
from torch.utils.data import Dataset

import tuner


class Blobs(Dataset):
    """RGB PIL images with one bright blob whose quadrant is the label (4 classes)."""

    def __init__(self, size: int, *, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.labels = rng.integers(0, 4, size)
        self.noise = rng.integers(0, 50, (size, 16, 16, 3), dtype=np.uint8)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[Image.Image, int]:
        image, label = self.noise[index].copy(), int(self.labels[index])
        row, col = (label // 2) * 8, (label % 2) * 8
        image[row + 2 : row + 6, col + 2 : col + 6] = 230
        return Image.fromarray(image), label


class TinyCNN(nn.Module):
    def __init__(self, num_classes: int, width: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, width, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(2),  # keeps where the blob was
            nn.Flatten(),
        )
        self.head = nn.Linear(4 * width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class MySpace:
    """The space: what each trial trains (WORKLOADS), what is searched (space), and the user's
    own model and data (build_model, build_data)."""

    WORKLOADS: ClassVar[dict[str, dict[str, Any]]] = {
        "cpu": {"img_size": 16, "epochs": None, "images": 576, "eval_every_images": 288}
    }

    @staticmethod
    def space(trial: Any, *, cuda: bool) -> dict[str, Any]:
        norm = trial.suggest_categorical("norm", ["native", "group"])
        batch_size = trial.suggest_categorical("batch_size", [16, 32])
        return {
            "norm": norm,
            "gn_groups": 4,
            "batch_size": batch_size,
            "lr": trial.suggest_float("base_lr", 1e-2, 5e-2, log=True) * batch_size / 256,
        }

    @staticmethod
    def build_model(config: tuner.TrainConfig, num_classes: int, width: int = 8) -> nn.Module:
        return TinyCNN(num_classes, width)

    @staticmethod
    def build_data(config: tuner.TrainConfig) -> tuple[Dataset, Dataset, int, dict[str, Any]]:
        normalization = {"mean": [0.1, 0.1, 0.1], "std": [0.25, 0.25, 0.25]}
        return Blobs(512, seed=0), Blobs(128, seed=1), 4, normalization


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke-test", action="store_true", help="2 trials, nothing after")
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--name", default="notebook")
    parser.add_argument("--storage", default="experiments")
    parser.add_argument("--reports-dir", default="reports")
    args = parser.parse_args()
    quick = {"num_samples": 2, "remeasure_top": 0, "effects_repeats": 0, "speed_repeats": 1}
    result = tuner.search(
        MySpace,
        name=args.name,
        storage=args.storage,
        reports_dir=args.reports_dir,
        world_size=args.world_size,
        cpus_per_trial=1,
        **(quick if args.smoke_test else {"num_samples": 6}),
    )
    print("answer:", result.answer_text)
    print("recommended:", result.recommended and result.recommended.to_dict())
    print(result.trials[["trial_id", "kind", "world_size", "val_accuracy"]].to_string())


if __name__ == "__main__":
    main()
