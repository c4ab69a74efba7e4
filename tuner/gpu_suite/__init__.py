"""The GPU suite: every CUDA path of the engine measured on a real GPU, one stage per call.

Each stage fits one device call of at most 9 minutes and writes everything it finds into one
folder, ``reports/examples/gpu-<device>/<stage>/`` (Markdown, CSV/JSON, plots, ``stage.json``):
``cuda-tests``, ``ladder``, ``recipe``, ``norms``, ``search``, ``fidelity``. ``--dry-run`` runs
every stage on the CPU with tiny settings (CI does, in under 3 minutes), to check the mechanics.
Entry point: ``python bench/gpu_suite.py STAGE|all [--dry-run]``; bench/README.md has the device
commands.
"""

from __future__ import annotations

from tuner.gpu_suite._context import StageContext, StageResult, device_slug
from tuner.gpu_suite._stages import STAGES, Stage, default_root, run_stage, stage, stage_names

__all__ = [
    "STAGES",
    "Stage",
    "StageContext",
    "StageResult",
    "default_root",
    "device_slug",
    "run_stage",
    "stage",
    "stage_names",
]
