"""The engine: one measured training run, every speed technique a switch; no Ray (data-parallel
inside a process group). Names load on first use (PEP 562): the trial record reads
``tuner.engine.result`` without torch, so ``tuner --help`` does not pay torch's import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuner.engine.build import prepare
    from tuner.engine.distributed import launched_group
    from tuner.engine.loop import short_run, train
    from tuner.engine.result import RunResult
    from tuner.engine.state import Progress, read_state_file, write_state_file

_HOMES = {
    "Progress": "state",
    "RunResult": "result",
    "launched_group": "distributed",
    "prepare": "build",
    "read_state_file": "state",
    "short_run": "loop",
    "train": "loop",
    "write_state_file": "state",
}
__all__ = [
    "Progress",
    "RunResult",
    "launched_group",
    "prepare",
    "read_state_file",
    "short_run",
    "train",
    "write_state_file",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
