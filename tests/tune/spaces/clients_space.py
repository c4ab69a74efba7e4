"""One trial of each kind (tests/conftest.py ``every_kind_experiment``), in an order the start-up
design fixes (with seed 0 it runs ``blowup, bad, crash, ok, weak, over, cut``: the dict below is
ordered so; concurrency 1 on a CPU runs them one after the other): ``blowup`` (lr 1e6) diverges;
``bad`` (5 classes for 10 digits) is bad input (a TunerError before training); ``crash`` (a
1-channel stem fed 3-channel images) fails inside the engine, which catches it; ``ok`` trains
to the end; ``weak`` (ResNet-18 at 64 px, batch 8: many times slower than ``ok``, by more than
load can swing two trials measured apart; lr 1e-9) learns nothing, so ParetoASHA stops it at
its first evaluation, behind ``ok``; ``over`` (batch 1024) is over a 220 MiB budget; ``cut``
would train a million steps before its first evaluation, so the search's time budget stops it
before it ever reports: incomplete. Its data waits 10 ms an image (a slow disk, say), so the
search's wait for its time budget leaves the machine's cores to the tests beside it; a trial
that trained at full speed held one of the two cores for minutes."""

from __future__ import annotations

import time
from typing import Any

import optuna
import torch
from torch.utils.data import Dataset

from tuner.config import TrainConfig
from tuner.engine.data import data_source
from tuner.workloads import RESNET_CPU_TRIAL

WORKLOADS: dict[str, dict[str, Any]] = {"cpu": RESNET_CPU_TRIAL}
NUM_SAMPLES = {"cpu": 7}
# The order the seed-0 design draws from (random.Random(0).sample of 7: indices 6, 3, 5, 0, 1,
# 2, 4), so that the trials run in the order the docstring names.
VARIANTS: dict[str, dict[str, Any]] = {
    "ok": {"batch_size": 32, "lr": 1e-2},
    # Its own smaller budget (the workload's 30 steps at batch 8): a scenario, not a comparison.
    "weak": {
        "batch_size": 8,
        "img_size": 64,
        "lr": 1e-9,
        "model": "resnet18",
        "images": 240,
        "eval_every_images": 120,
    },
    # The workload's 30 steps at its batch (960 images would be one step): its feasibility
    # check, after the warm-up and 3 steps, rejects it before it trains.
    "over": {"batch_size": 1024, "lr": 1e-3, "images": 30_720, "eval_every_images": 15_360},
    "bad": {"batch_size": 32, "lr": 1e-3, "num_classes": 5},
    "cut": {
        "batch_size": 64,
        "lr": 1e-2,
        "images": 64_000_000,
        "eval_every_images": 64_000_000,
        "img_size": 16,
        "data": f"{__file__}:slow_digits",
    },
    "crash": {"batch_size": 32, "lr": 1e-3, "model_kwargs": {"in_chans": 1}},
    "blowup": {"batch_size": 32, "lr": 1e6},
}
RUN_ORDER = ("blowup", "bad", "crash", "ok", "weak", "over", "cut")


def space(trial: optuna.Trial, *, cuda: bool) -> dict[str, Any]:
    return dict(VARIANTS[trial.suggest_categorical("variant", list(VARIANTS))])


SLOW_IMAGE_S = 0.01


class _Slow(Dataset):
    """A dataset whose every item waits ``SLOW_IMAGE_S`` first, as a slow disk would."""

    def __init__(self, items: Dataset) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(SLOW_IMAGE_S)
        return self.items[index]


def slow_digits(config: TrainConfig) -> tuple[Dataset, Dataset, int, dict[str, Any]]:
    """``cut``'s data: the built-in digits, each training image served slowly."""
    source, _ = data_source("digits")
    assert source.load is not None  # digits are loaded on the host
    train, val, classes, *_ = source.load(config, "")
    return _Slow(train), val, classes, {"mean": source.mean, "std": source.std}
