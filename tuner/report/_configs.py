"""Recommended configurations in words and as files ``tuner train --config`` reads.

The configs themselves are the answer's (:attr:`tuner.answer.Answer.configs`, built by
:func:`tuner.spaces.train_config_of`).
"""

from __future__ import annotations

import json
from pathlib import Path

from tuner.config import TrainConfig
from tuner.techniques import KNOBS

__all__ = ["describe", "export_config"]


def export_config(config: TrainConfig, path: Path) -> Path:
    """Write ``config`` as JSON; ``load_config_file(path)`` gives it back."""
    path.write_text(json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n")
    return path


def describe(config: TrainConfig) -> str:
    """The registry knobs of ``config`` in plain words: what is on, batch size and lr."""
    parts = [f"batch size {config.batch_size}", f"lr {config.lr:.2g}"]
    values = config.to_dict()
    for entry in KNOBS:
        value = values[entry.field]
        if entry.field in ("batch_size", "lr", "gn_groups") or entry.companion:
            continue
        if entry.field == "norm":
            if value == "group":
                parts.append(f"GroupNorm with {config.gn_groups} groups")
            elif value == "batch":
                parts.append("BatchNorm")
            continue
        if value != entry.off:
            parts.append(entry.label if isinstance(value, bool) else f"{entry.label} {value}")
    if config.amp == "off":
        parts.append("fp32")
    return ", ".join(parts)
