"""tuner: measured tuning of training settings and speed techniques, for timm models or your
own ``nn.Module`` and ``Dataset``.

``tuner.search(space, **options)``, ``tuner.train(config)`` and ``tuner.load(experiment)`` are the
Python API (:mod:`tuner.api`); they load on first use, so ``import tuner`` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tuner._version import __version__ as __version__  # re-exported: tuner.__version__
from tuner.config import TrainConfig, load_config_file
from tuner.errors import TunerError

if TYPE_CHECKING:
    from tuner.api import SearchResult, load, search, train

__all__ = [
    "SearchResult",
    "TrainConfig",
    "TunerError",
    "load",
    "load_config_file",
    "search",
    "train",
]

_API = frozenset({"SearchResult", "load", "search", "train"})


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("tuner.api"), name)
