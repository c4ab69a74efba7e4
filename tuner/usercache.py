"""The user cache folder: what tuner keeps between experiments (the speed probes remembered per
machine, the shipped JPEG workload's files). Owned here so the engine and the search share it."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_DIR_ENV", "cache_dir"]

CACHE_DIR_ENV = "TUNER_CACHE_DIR"  # overrides the user cache folder (tests use a tmp folder)


def cache_dir() -> Path:
    """Where tuner keeps what outlives an experiment: ``$TUNER_CACHE_DIR``, else the user
    cache folder (``$XDG_CACHE_HOME/tuner``, by default ``~/.cache/tuner`` on Linux,
    ``~/Library/Caches/tuner`` on macOS)."""
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("tuner", appauthor=False))
