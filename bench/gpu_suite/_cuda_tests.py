"""Stage ``cuda-tests``: every CUDA test of the engine, then the prefetcher's reserved memory.

1. ``pytest tests/engine -m cuda`` (the checkout's tests beside this suite, or ``--tests
   PATH``): the tests marked ``cuda`` (prefetcher correctness and flat
   reserved memory over epochs, fp16 with GradScaler, fused AdamW, memory accounting reset
   between runs in one process, a max-autotune run followed by a plain one). Without CUDA they
   skip, so on a GPU the stage passes only when none failed **and none skipped**; the dry run
   checks that they are collected and skip cleanly.
2. A prefetcher training run of six epochs on host data, ``memory_reserved`` after each epoch:
   the figures behind "the prefetcher's reserved memory stays flat".
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.workloads import MICRO_VIT

from ._context import STOPPED, StageContext, StageResult, run_stoppable

__all__ = ["ONE_PROCESS", "engine_tests", "run"]

# This suite lives in a checkout's bench/; the engine's tests are that checkout's tests/engine.
_TESTS = Path(__file__).resolve().parents[2] / "tests" / "engine"
EPOCHS = 6
_PREFETCH_S = 45  # the prefetcher's six epochs of a micro ViT on a GPU, start-up included
# One process, whatever pyproject's addopts say: its `-n auto` needs pytest-xdist (the GPU
# rehearsal's venv has none), and two workers would share the one GPU whose memory the tests
# measure. Without xdist its `xdist_group` mark (tests/tiers.py) is unknown, so no
# --strict-markers either.
ONE_PROCESS = ["-p", "no:xdist", "-o", "addopts=-ra"]
_PREFETCH: dict[str, Any] = {
    **MICRO_VIT,
    "data": "synthetic_host",
    "img_size": 32,
    "num_classes": 10,
    "prefetch": "cuda_stream",
    "pin_memory": True,
    "non_blocking": True,
    "epochs": EPOCHS,
    "steps": None,
    "max_eval_batches": 1,
}


def run(ctx: StageContext) -> StageResult:
    counts = _pytest(ctx)
    series = _prefetch_epochs(ctx)
    ctx.write_csv("prefetch_reserved_per_epoch.csv", series)
    flat = _flat(series)
    _write(ctx, counts, series, flat)
    ran = counts["tests"] - counts["skipped"]
    if ctx.cuda:
        ok = counts["tests"] > 0 and not counts["failures"] + counts["errors"] + counts["skipped"]
        ok = ok and flat is True
    else:
        ok = counts["tests"] > 0 and not counts["failures"] + counts["errors"]
    tests = (
        f"{counts['tests']} CUDA tests: {ran - counts['failures'] - counts['errors']} passed, "
        f"{counts['failures'] + counts['errors']} failed, {counts['skipped']} skipped"
        if counts["tests"]
        else "no CUDA test reported (pytest.log says why)"
    )
    line = f"{tests}; prefetcher reserved memory over {EPOCHS} epochs: {_flat_text(flat)}"
    return StageResult(ok, line)


def _pytest(ctx: StageContext) -> dict[str, int]:
    """Run the CUDA-marked engine tests in a fresh process; counts from its JUnit XML."""
    junit, tests = ctx.path("junit.xml"), engine_tests(ctx.options.get("tests"))
    command = [sys.executable, "-m", "pytest", str(tests), "-m", "cuda", *ONE_PROCESS,
               "-v", "-rA", "-p", "no:cacheprovider", f"--junitxml={junit}"]  # fmt: skip
    # The prefetcher's epochs still need their time after the tests, within the stage's.
    timeout = max(ctx.remaining_s() - ctx.pick(_PREFETCH_S, 30), 30)
    ctx.log("+ " + " ".join(command))
    stopped = run_stoppable(command, ctx.path("pytest.log"), timeout, cwd=_project(tests))
    stopped = stopped == STOPPED
    if stopped:
        ctx.log(f"pytest outran its {timeout:.0f} s and was stopped; pytest.log has what ran")
    counts = _counts(junit)
    counts["errors"] += stopped  # tests that never ran are not a pass
    return counts


def engine_tests(given: Path | str | None) -> Path:
    """The engine's test folder: ``given`` (``--tests``), else the one of this checkout.

    Raises:
        TunerError: no such folder.
    """
    tests = Path(given) if given else _TESTS
    if not tests.is_dir():
        raise TunerError(f"no engine tests at {tests}; pass --tests PATH (a tests/engine folder).")
    return tests


def _project(tests: Path) -> Path:
    """Where pytest runs: the nearest folder above ``tests`` with a pyproject.toml (its markers
    and options), else the tests' own folder."""
    return next((p for p in tests.resolve().parents if (p / "pyproject.toml").is_file()), tests)


def _counts(junit: Path) -> dict[str, int]:
    """Tests, failures, errors and skips from JUnit XML (one error when there is none)."""
    if not junit.is_file():
        return {"tests": 0, "failures": 0, "errors": 1, "skipped": 0}
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    return {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}


def _prefetch_epochs(ctx: StageContext) -> pd.DataFrame:
    """``memory_reserved`` after each of ``EPOCHS`` epochs of a prefetcher run (NaN on a CPU)."""
    import torch

    from tuner.engine import train

    batch = ctx.pick(256, 16)
    config = TrainConfig.from_params(
        {**_PREFETCH, "batch_size": batch, "synthetic_size": batch * ctx.pick(20, 3),
         "device": ctx.device}
    )  # fmt: skip
    rows: list[dict[str, Any]] = []

    def record(progress: Any) -> None:
        reserved = torch.cuda.memory_reserved() if ctx.cuda else float("nan")
        rows.append({"epoch": progress.epoch, "step": progress.step, "reserved_bytes": reserved})

    result = train(config, on_eval=record)
    frame = pd.DataFrame(rows)
    frame.attrs["result"] = {"status": result.status, "prefetch": result.effective["prefetch"],
                             "notes": result.notes}  # fmt: skip
    return frame


def _flat(series: pd.DataFrame) -> bool | None:
    """Reserved memory never above its level after the first epoch (None: not measured)."""
    values = series["reserved_bytes"].dropna() if len(series) else series
    if len(values) < 2:
        return None
    return bool(values.iloc[1:].max() <= values.iloc[1])


def _flat_text(flat: bool | None) -> str:
    return {True: "flat", False: "GROWS", None: "not measured (needs CUDA)"}[flat]


def _write(
    ctx: StageContext, counts: dict[str, int], series: pd.DataFrame, flat: bool | None
) -> None:
    from tuner.report.document import Section, Table

    cases = _cases(ctx.path("junit.xml"))
    ctx.write_csv("tests.csv", cases)
    shown = series.assign(reserved=series["reserved_bytes"].map(_mib))
    ctx.write_markdown(
        "CUDA tests of the engine",
        [
            Section("Tests (`pytest tests/engine -m cuda`)", [
                f"{counts['tests']} collected, {counts['failures']} failed, {counts['errors']} "
                f"errors, {counts['skipped']} skipped. Full output: pytest.log, junit.xml.",
                Table(cases)]),
            Section(f"Prefetcher: reserved memory after each of {EPOCHS} epochs", [
                f"Flat: {_flat_text(flat)}. Run: {series.attrs.get('result')}.",
                Table(shown.drop(columns=["reserved_bytes"]))]),
        ],
    )  # fmt: skip


def _cases(junit: Path) -> pd.DataFrame:
    if not junit.is_file():
        return pd.DataFrame(columns=["test", "outcome", "seconds", "message"])
    rows = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome, message = tag, (node.get("message") or "")[:200]
        rows.append({"test": case.get("name"), "outcome": outcome,
                     "seconds": float(case.get("time") or 0), "message": message})  # fmt: skip
    return pd.DataFrame(rows)


def _mib(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value / 2**20:,.1f} MiB"
