"""The engine: one measured training run of a timm model, with every speed technique a switch.

No Ray here: the search's trainable wraps :func:`train`. Inside an initialized
``torch.distributed`` process group (torchrun, a search's data-parallel trial) the same call
trains data-parallel.

The names below load on first use (PEP 562): ``tuner.engine.result`` is read by the trial
record without torch, so ``tuner --help`` and the usage errors do not pay torch's import.
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
