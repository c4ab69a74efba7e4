"""User code for the engine's tests, imported by name (``user_factories:good_model``) the way a
user's own module is: models and datasets, good and broken."""

from __future__ import annotations

from typing import Any

import torch
from PIL import Image
from torch import nn
from torch.utils.data import Dataset, TensorDataset

CLASSES = 4


def _images(n: int, channels: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, channels, 16, 16), dtype=torch.uint8, generator=gen)
    return images, torch.randint(0, CLASSES, (n,), generator=gen)


class PilImages(Dataset):
    """(PIL image, int) items, as a dataset reading files would give."""

    def __init__(self, n: int) -> None:
        self.images, self.labels = _images(n)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        array = self.images[index].permute(1, 2, 0).numpy()
        return Image.fromarray(array), int(self.labels[index])


def good_model(config: Any, num_classes: int, width: int = 8) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1),
        nn.BatchNorm2d(width),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(width, num_classes),
    )


def pil_data(config: Any) -> tuple[Dataset, Dataset, int]:
    return PilImages(64), PilImages(16), CLASSES


def float_data(config: Any) -> tuple[Dataset, Dataset, int, dict[str, Any]]:
    images, labels = _images(64)
    floats = images.float() / 255
    return (
        TensorDataset(floats, labels),
        TensorDataset(floats[:16], labels[:16]),
        CLASSES,
        {"mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]},
    )


def raising_model(config: Any, num_classes: int) -> nn.Module:
    raise ValueError("my model needs width >= 4")


def not_a_module(config: Any, num_classes: int) -> Any:
    return "a string"


def wrong_classes_model(config: Any, num_classes: int) -> nn.Module:
    return good_model(config, num_classes + 1)


def one_channel_model(config: Any, num_classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, num_classes)
    )


def labels_out_of_range(config: Any) -> tuple[Dataset, Dataset, int]:
    images, labels = _images(32)
    return TensorDataset(images, labels + CLASSES), TensorDataset(images, labels), CLASSES


def triples(config: Any) -> tuple[Dataset, Dataset, int]:
    images, labels = _images(32)
    return TensorDataset(images, labels, labels), TensorDataset(images, labels), CLASSES


def lists_not_datasets(config: Any) -> tuple[Any, Any, int]:
    return [1, 2, 3], [1], CLASSES


def two_things(config: Any) -> tuple[Any, Any]:
    return PilImages(4), PilImages(4)


class FailsWhileTraining(nn.Module):
    """Fine in the preflight (eval mode), raises at its third training step."""

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.net = good_model(None, num_classes)
        self.steps = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.steps += 1
            if self.steps == 3:
                raise ValueError("my forward failed at step 3")
        return self.net(x)


def fails_while_training(config: Any, num_classes: int) -> nn.Module:
    return FailsWhileTraining(num_classes)


class NumpyLabels(Dataset):
    """(uint8 tensor, numpy int64) items: a numpy label is an int class index too."""

    def __init__(self, n: int) -> None:
        self.images, labels = _images(n)
        self.labels = labels.numpy()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, Any]:
        return self.images[index], self.labels[index]


def numpy_labels(config: Any) -> tuple[Dataset, Dataset, int]:
    return NumpyLabels(32), NumpyLabels(8), CLASSES


def float_labels(config: Any) -> tuple[Dataset, Dataset, int]:
    images, labels = _images(32)
    return TensorDataset(images, labels.float()), TensorDataset(images, labels), CLASSES
