"""The command line of ``tuner search`` that the tests run in a subprocess (their own Ray, as a
user's), spelled once."""

from __future__ import annotations

import sys
from pathlib import Path


def search_command(*args: str, name: str, storage: Path) -> list[str]:
    """``python -m tuner search ARGS --name NAME --storage STORAGE``."""
    return [
        sys.executable,
        "-m",
        "tuner",
        "search",
        *args,
        "--name",
        name,
        "--storage",
        str(storage),
    ]
