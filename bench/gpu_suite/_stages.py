"""The stages, in the order to run them, and the runner that gives each its folder and time."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tuner.errors import TunerError

from . import (
    _cuda_tests,
    _data_parallel,
    _fidelity,
    _ladder,
    _norms,
    _recipe,
    _search,
)
from ._context import DRY_RUN_DIR, StageContext, StageResult, device_slug

__all__ = [
    "PLANS",
    "STAGES",
    "PlanStep",
    "Stage",
    "default_root",
    "plan_steps",
    "run_stage",
    "stage",
    "stage_names",
    "write_archive",
]

STAGE_TIME_LIMIT_S = 8 * 60  # measuring loops start nothing past this; a device call is 9 min


@dataclass(frozen=True)
class Stage:
    """One stage: a name (its folder), what it measures, a planning estimate on an H100."""

    name: str
    summary: str
    estimate_min: float  # on an H100, from the settings' step counts (not yet measured)
    run: Callable[[StageContext], StageResult]


STAGES: tuple[Stage, ...] = (
    Stage("cuda-tests", "the engine's CUDA tests; prefetcher reserved memory per epoch", 4,
          _cuda_tests.run),
    Stage("ladder", "ViT-B/16 ladder fp32 -> bf16 -> fused AdamW -> compile -> max-autotune, MFU",
          8, _ladder.run),
    Stage("recipe", "AMP fp16 -> set_to_none -> non_blocking -> prefetcher on host data", 5,
          _recipe.run),
    Stage("norms", "BatchNorm vs GroupNorm(1, 8, 32) on resnet50 and vit_small_r26_s32_224", 5,
          _norms.run),
    Stage("search", "tuner search vit_space --max-memory (calibrated), one GPU per trial", 8,
          _search.run),
    Stage("fidelity", "the engine vs a minimal loop, fresh processes, interleaved", 4,
          _fidelity.run),
    Stage("data-parallel", "an nccl group of 1; a world-size-2 trial on 2 GPUs, each rank's "
          "environment", 1, _data_parallel.run),
)  # fmt: skip
_BY_NAME = {s.name: s for s in STAGES}


@dataclass(frozen=True)
class PlanStep:
    """One stage of a GPU plan's command, with its share of the command's time and options."""

    stage: str
    time_limit_s: float
    options: Mapping[str, Any]


# The GPU plan (bench/README.md "A GPU plan in 15 minutes"): two device commands of at most
# 9 minutes each, by value; 15 minutes of device time hold one machine start and both only when
# each ends in 8 (PLAN_COMMAND_S is the most; --budget-s gives the second what is left). The
# stages' shares leave PLAN_OVERHEAD_S of each command for unpacking .gpu/ and the archive.
PLAN_COMMAND_S = 540
PLAN_OVERHEAD_S = 60
# Plan 2's search, sized by bench/gpu_cost_model.py (bench/README.md): 6 trials predicted to
# end by about 160 s on an H100 at 38,400 images (150 steps at batch 256), 25 s each at most.
SEARCH_TRIALS = 6  # --trials: plan 2's search asks for this many trials ...
SEARCH_MIN_TRIALS = 4  # ... and fails with fewer finished (--min-trials)
SEARCH_BUDGET_S = 200  # --search-budget-s: at most this much of plan 2's search stage
PLANS: dict[int, tuple[PlanStep, ...]] = {
    1: (
        PlanStep("cuda-tests", 150, {}),
        PlanStep("ladder", 270, {"quick": True, "trace": True}),
    ),
    2: (
        # data-parallel first: a minute, never yet run on a GPU, and the search takes what is left
        PlanStep("data-parallel", 60, {}),
        PlanStep("search", 330, {"trials": SEARCH_TRIALS, "min_trials": SEARCH_MIN_TRIALS,
                                 "search_budget_s": SEARCH_BUDGET_S, "remeasure_top": 1}),
        PlanStep("recipe", 45, {"repeats": 2}),
        PlanStep("norms", 45, {"repeats": 2}),
    ),
}  # fmt: skip


def plan_steps(number: int) -> tuple[PlanStep, ...]:
    """The steps of plan ``number``.

    Raises:
        TunerError: no such plan.
    """
    if number not in PLANS:
        raise TunerError(f"unknown plan {number}; choose from {', '.join(map(str, PLANS))}.")
    return PLANS[number]


def write_archive(root: Path, archive: Path, log: Callable[[str], Any] = print) -> int:
    """``archive`` (.tgz) of ``root``'s stage folders, replaced whole (a command cut while it
    packs keeps the last one); its size in bytes."""
    import tarfile

    partial = archive.with_name(archive.name + ".partial")
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(root, arcname=root.name)
    partial.replace(archive)
    size = archive.stat().st_size
    if size > ARCHIVE_MOST_BYTES:
        log(f"warning: {archive} is {size / 2**20:.1f} MiB, over the 16 MiB a device file may be")
    return size


ARCHIVE_MOST_BYTES = 16 * 2**20  # what one file back from the device machine may be


def stage(name: str) -> Stage:
    """The stage called ``name``.

    Raises:
        TunerError: no such stage.
    """
    if name not in _BY_NAME:
        raise TunerError(f"unknown stage {name!r}; choose from {', '.join(_BY_NAME)} or all.")
    return _BY_NAME[name]


def default_root(*, dry_run: bool) -> Path:
    """``reports/examples/gpu-<device>/`` on a GPU; the dry run's git-ignored folder on a CPU."""
    import torch

    if dry_run or not torch.cuda.is_available():
        return DRY_RUN_DIR
    return Path("reports") / "examples" / f"gpu-{device_slug(torch.cuda.get_device_name())}"


def run_stage(
    name: str,
    *,
    root: Path,
    dry_run: bool,
    options: Mapping[str, Any] | None = None,
    time_limit_s: float = STAGE_TIME_LIMIT_S,
    log: Callable[[str], Any] = print,
) -> dict[str, Any]:
    """Run one stage into ``root/<name>/`` (emptied first) and write its ``stage.json``.

    A stage that raises is recorded as failed (traceback in ``stage.json``), never re-raised.

    Raises:
        TunerError: an unknown stage, or a GPU run asked for where there is no CUDA device.
    """
    import torch

    spec = stage(name)
    cuda = torch.cuda.is_available() and not dry_run
    if not dry_run and not cuda:
        raise TunerError("no CUDA device here: run the suite on a GPU, or with --dry-run.")
    out_dir = root / name
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    ctx = StageContext(name, out_dir, dry_run, cuda, time_limit_s, dict(options or {}), log)
    started, error = time.perf_counter(), ""
    try:
        result = spec.run(ctx)
    except Exception as exc:
        result = StageResult(False, f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
        error = traceback.format_exc()
    record = {
        "stage": name,
        "ok": result.ok,
        "summary": result.summary,
        "error": error,
        "dry_run": dry_run,
        "seconds": round(time.perf_counter() - started, 1),
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "files": sorted(str(p.relative_to(out_dir)) for p in out_dir.rglob("*") if p.is_file()),
        **_versions(cuda),
    }
    (out_dir / "stage.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def _versions(cuda: bool) -> dict[str, Any]:
    """What the README quotes with the results: date, torch, CUDA, driver, device."""
    import timm
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "timm": timm.__version__,
        "cuda": torch.version.cuda if cuda else None,
        "device_name": torch.cuda.get_device_name() if cuda else platform.machine(),
        "driver": _driver() if cuda else None,
        "argv": sys.argv,
    }


def _driver() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


def stage_names(names: Sequence[str]) -> list[str]:
    """``all`` -> every stage in order; else the names, checked."""
    if list(names) == ["all"]:
        return [s.name for s in STAGES]
    return [stage(n).name for n in names]
