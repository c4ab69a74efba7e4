"""The engine: one measured training run of a timm model, with every speed technique a switch.

No Ray here: the search's trainable wraps :func:`train`. Inside an initialized
``torch.distributed`` process group (torchrun, Ray Train) the same call trains data-parallel.
"""

from __future__ import annotations

from tuner.engine.distributed import launched_group
from tuner.engine.loop import probe, train
from tuner.engine.result import RunResult
from tuner.engine.state import Progress, read_state_file, write_state_file

__all__ = [
    "Progress",
    "RunResult",
    "launched_group",
    "probe",
    "read_state_file",
    "train",
    "write_state_file",
]
