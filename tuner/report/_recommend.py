"""Recommended configurations: a trial's full run config, as a file `tuner train --config` reads."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuner.config import TrainConfig, make_config

__all__ = ["export_config", "trial_config"]


def trial_config(config: Mapping[str, Any], workload: Mapping[str, Any] | None) -> TrainConfig:
    """The fixed workload, then the trial's settings, without search-only keys (``base_lr``).

    Raises:
        TunerError: the stored settings do not make a valid run config.
    """
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    merged = {**(workload or {}), **config}
    return make_config({k: v for k, v in merged.items() if k in fields})


def export_config(config: TrainConfig, path: Path) -> Path:
    """Write ``config`` as JSON; ``load_config_file(path)`` gives it back."""
    path.write_text(json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n")
    return path
