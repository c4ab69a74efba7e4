"""Recommended configurations in words and as files ``tuner train --config`` reads.

The configs themselves are the answer's (:attr:`tuner.answer.Answer.configs`, built by
:func:`tuner.spaces.train_config_of`).
"""

from __future__ import annotations

import json
from pathlib import Path

from tuner.config import TrainConfig
from tuner.techniques import KNOBS
from tuner.units import plural

__all__ = ["describe", "export_config", "num_classes", "train_command"]

# The classes of the data sources whose count is fixed (the engine's data registry); the others
# (an image folder) count their class folders, and a set ``num_classes`` wins for all.
_FIXED_CLASSES = {"digits": 10, "cifar10": 10, "synthetic": 1000, "synthetic_host": 1000}


def export_config(config: TrainConfig, path: Path, *, world_size: int = 1) -> Path:
    """Write ``config`` as JSON; ``load_config_file(path)`` gives it back. A data-parallel
    pick's file wraps it (``{"config": ..., "world_size": N, "command": ...}``, which
    ``load_config_file`` unwraps): the run config alone would rerun it in one process."""
    data: dict = config.to_dict()
    if world_size > 1:
        command = train_command(path, world_size)
        data = {"config": data, "world_size": world_size, "command": command}
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path


def train_command(path: Path, world_size: int = 1) -> str:
    """The command that reruns a config file: under ``torchrun`` on ``world_size`` workers."""
    if world_size > 1:
        return f"torchrun --nproc-per-node {world_size} -m tuner train --config {path}"
    return f"python -m tuner train --config {path}"


def describe(config: TrainConfig) -> str:
    """The registry knobs of ``config`` in plain words: what is on, batch size and lr."""
    parts = [f"batch size {config.batch_size}", f"lr {config.lr:.2g}"]
    norms = {"group": f"GroupNorm with {plural(config.gn_groups, 'group')}", "batch": "BatchNorm"}
    for entry in KNOBS:
        value = getattr(config, entry.field)
        if entry.field in ("batch_size", "lr", "gn_groups") or entry.companion:
            continue
        if entry.field == "norm" and value in norms:
            parts.append(norms[value])
        elif entry.field != "norm" and value != entry.off:
            parts.append(entry.label if isinstance(value, bool) else f"{entry.label} {value}")
    if config.amp == "off":
        parts.append("fp32")
    return ", ".join(parts)


def num_classes(config: TrainConfig) -> int | None:
    """How many classes ``config`` trains on (chance accuracy is one over it), when known."""
    if config.num_classes:
        return config.num_classes
    name, _, path = config.data.partition(":")
    if name in _FIXED_CLASSES:
        return _FIXED_CLASSES[name]
    train = Path(path) / "train"
    if name == "imagefolder" and train.is_dir():
        return sum(1 for child in train.iterdir() if child.is_dir()) or None
    return None
