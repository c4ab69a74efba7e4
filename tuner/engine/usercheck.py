"""The preflight of the user's own model and data (each run, and the search's driver before any
trial): the first items of each split are ``(image [C, H, W], int label in [0, classes))`` and
one batch gives ``[batch, num_classes]`` logits, so bad user code is one line, not a traceback
deep in a trial. The forward runs in eval mode, without gradients, the RNG state restored.
"""

from __future__ import annotations

import contextlib
import operator
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset, default_collate

from tuner.config import TrainConfig
from tuner.engine.data import DataBundle, is_user_data, normalize
from tuner.usercode import UserCodeError, call_user, is_ref

__all__ = ["ITEMS_IN_A_RUN", "LABELS_CHECKED", "check_user_code", "uses_user_code"]

LABELS_CHECKED = 64  # items of each split the driver reads: cheap for any dataset
ITEMS_IN_A_RUN = 4  # ... and each run (a trial's speed probes build several runs)


def uses_user_code(config: TrainConfig) -> bool:
    """Whether the run's model or data is the user's own."""
    return is_ref(config.model) or is_user_data(config.data)


def check_user_code(
    config: TrainConfig,
    data: DataBundle,
    model: nn.Module,
    *,
    num_classes: int | None = None,
    items: int = LABELS_CHECKED,
) -> None:
    """Raise one line (UserCodeError) for user data or a model no run could train;
    ``num_classes``: the model's (may exceed the data's); ``items``: per split."""
    with torch.random.fork_rng(devices=[]):
        train = _dataset(data.train_loader)
        for split, dataset in (("train", train), ("val", _dataset(data.val_loader))):
            if dataset is not None:
                _check_items(config, split, dataset, data.num_classes, items)
        if train is not None:
            _check_forward(config, train, data, model, num_classes or data.num_classes)


def _dataset(loader: Any) -> Dataset | None:
    return getattr(loader, "dataset", None)  # None: synthetic batches, made here


def _check_items(
    config: TrainConfig, split: str, dataset: Dataset, classes: int, items: int
) -> None:
    what = f"data={config.data!r}"
    for index in range(min(items, len(dataset))):  # type: ignore[arg-type]
        item = call_user(dataset.__getitem__, index, what=f"{what}: {split} item {index}")
        if not isinstance(item, tuple | list) or len(item) != 2:
            kind = f"a {type(item).__name__}" + (
                f" of {len(item)}" if isinstance(item, tuple | list) else ""
            )
            raise UserCodeError(
                f"{what}: {split} item {index} is {kind}; each item must be (image, label)."
            )
        image, label = item
        if not isinstance(image, torch.Tensor) or image.dim() != 3:
            shape = f" of shape {list(image.shape)}" if isinstance(image, torch.Tensor) else ""
            raise UserCodeError(
                f"{what}: {split} item {index}'s image is a {type(image).__name__}{shape}; "
                "give a [C, H, W] tensor or a PIL image."
            )
        _check_label(what, split, index, label, classes)


def _check_label(what: str, split: str, index: int, label: Any, classes: int) -> None:
    with contextlib.suppress(TypeError):  # an int, a numpy integer, an integer 0-d tensor
        label = label if isinstance(label, bool) else operator.index(label)
    if isinstance(label, bool) or not isinstance(label, int):
        raise UserCodeError(
            f"{what}: {split} item {index}'s label is {label!r}; give an int class index."
        )
    if not 0 <= label < classes:
        raise UserCodeError(
            f"{what}: {split} item {index} has label {label}, outside num_classes={classes}; "
            f"labels must be 0..{classes - 1} (or return a larger num_classes)."
        )


def _check_forward(
    config: TrainConfig, train: Dataset, data: DataBundle, model: nn.Module, classes: int
) -> None:
    """One small batch through the model, as the loop feeds it."""
    items = [train[i] for i in range(min(2, len(train)))]  # type: ignore[arg-type]
    images, _ = default_collate(items)
    device = next(iter(model.parameters()), torch.empty(0)).device
    mean = torch.tensor(data.mean, device=device).view(1, -1, 1, 1)
    std = torch.tensor(data.std, device=device).view(1, -1, 1, 1)
    x = normalize(images.to(device), mean, std)
    what = f"model={config.model!r}"
    was_training = model.training
    model.eval()  # no BatchNorm statistics updated by this check
    try:
        with torch.no_grad():
            out = call_user(model, x, what=f"{what} on a batch of {list(x.shape)} images")
    finally:
        model.train(was_training)
    expected = [x.shape[0], classes]
    if not isinstance(out, torch.Tensor) or list(out.shape) != expected:
        got = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise UserCodeError(
            f"{what} returned {got} for a batch of {x.shape[0]}; it must return logits of "
            f"shape {expected} (batch, num_classes={classes})."
        )
