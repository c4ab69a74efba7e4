"""Stage ``search``: a short real ``python -m tuner search vit_space`` under a memory budget.

On the space's ``gpu`` workload, one GPU per trial (the search's default where GPUs exist), with
a ``--max-memory`` budget that rejects some configs: unless ``--max-memory`` is given, 1.5x the
peak of the workload at batch 128 in bf16 (measured here first), so the large batches of the
space are over it. The search's own report lands in this stage's folder, its small experiment
files (study, metadata, re-measurement) beside it; Ray's trial folders (with checkpoints) stay
in a temporary folder.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tuner.compare.seeds import SEEDS
from tuner.config import TrainConfig
from tuner.experiment import RAY_LOG_FILE, REPORT_FILE, TUNER_FILES
from tuner.techniques import knob
from tuner.units import format_bytes

from ._context import STOPPED, StageContext, StageResult, run_stoppable

__all__ = ["SPACE", "run", "settings", "trial_kinds", "verdict"]

SPACE = "vit_space"
NAME = f"{SPACE}-suite"
_GPU: dict[str, Any] = {
    "workload": "gpu",
    "calibration": {"batch_size": 128, **knob("amp").settings("bf16")},
    "budget_factor": 1.5,  # batch 256 in bf16, or 128 in fp32, is over it
    "flags": ["--images", "12800", "--speed-repeats", "1",
              "--time-budget-s", "10", "--remeasure-repeats", "2",
              "--remeasure-max-repeats", "3", "--effects-repeats", "0"],
    "trials": 10,  # --trials
    "remeasure_top": 2,  # --remeasure-top
    "search_time_budget_s": 300,  # --search-budget-s
}  # fmt: skip
# What the search command spends outside its --search-time-budget-s: Ray's start and the report,
# each re-measured top trial (fresh builds, compiled ones included), the seeds' retraining
# (SEEDS rounds of the picks and the pick's plain loop, each run at most a trial's time budget:
# on an H200, 2026-11-29, with 25 s trials, re-measuring took 49 s and the seeds "about 47 s a
# round", which the stage had not counted, so the command's timeout cut the search before its
# report), and the grace a Ctrl-C at the stage's end gives the search to write what finished.
_START_AND_REPORT_S = 50
_PER_REMEASURED_S = 60
_SEED_ARMS = 3  # the rule's pick, the most accurate beside it, the pick's plain loop
_STOP_GRACE_S = 40
_DRY: dict[str, Any] = {
    "workload": "cpu",
    "calibration": {"batch_size": 64},
    "budget_factor": 1.0,  # tiny: of the seeded first two trials, one is over it
    # 640 images (10 steps at batch 64) bound it; the time budget only caps a machine far
    # slower than a CPU dry run's (3 s starved both trials on a busy 2-core machine).
    "flags": ["--images", "640", "--time-budget-s", "20",
              "--remeasure-repeats", "1", "--remeasure-max-repeats", "1",
              "--effects-repeats", "0"],
    "trials": 2,
    "remeasure_top": 1,
    "search_time_budget_s": None,
}  # fmt: skip


def run(ctx: StageContext) -> StageResult:
    s = settings(ctx)
    given = ctx.options.get("max_memory")
    budget = given or _calibrated_budget(ctx, s)
    source = "--max-memory" if given else (
        f"{s['budget_factor']}x the workload's peak at {s['calibration']}")  # fmt: skip
    storage = Path(tempfile.mkdtemp(prefix="tuner-suite-search-"))
    command = [
        sys.executable, "-m", "tuner", "search", SPACE, "--workload", s["workload"],
        "--max-memory", f"{budget}B", "--name", NAME, "--storage", str(storage),
        "--reports-dir", str(ctx.out_dir), *s["flags"], "--num-samples", str(s["trials"]),
        "--remeasure-top", str(s["remeasure_top"]),
        *_time_budget(ctx, s["search_time_budget_s"], s["remeasure_top"], _trial_s(s)),
    ]  # fmt: skip
    ctx.log("+ " + " ".join(command))
    code = _run_search(ctx, command)
    trials = _keep_experiment_files(ctx, storage / NAME)
    shutil.rmtree(storage, ignore_errors=True)
    return _finish(ctx, command, code, (budget, source), trials)


def settings(ctx: StageContext) -> dict[str, Any]:
    """The stage's settings for this mode, on a GPU with what the command line (or a plan)
    gave: ``trials``, ``remeasure_top``, ``search_budget_s``."""
    s = dict(ctx.pick(_GPU, _DRY))
    if ctx.dry_run:  # the dry run checks mechanics: its two tiny trials, whatever a plan asks
        return s
    for option, key in (("trials", "trials"), ("remeasure_top", "remeasure_top"),
                        ("search_budget_s", "search_time_budget_s")):  # fmt: skip
        if ctx.options.get(option) is not None:
            s[key] = ctx.options[option]
    return s


def _time_budget(
    ctx: StageContext, most_s: int | None, remeasure_top: int = 2, trial_s: float = 10.0
) -> list[str]:
    """``--search-time-budget-s``: at most ``most_s``, and what the stage's time leaves after the
    rest."""
    if most_s is None:
        return []
    seeds_s = SEEDS * _SEED_ARMS * trial_s
    after = _START_AND_REPORT_S + _PER_REMEASURED_S * remeasure_top + seeds_s + _STOP_GRACE_S
    return [
        "--search-time-budget-s",
        str(int(max(60, min(most_s, ctx.remaining_s() - after)))),
    ]


def _trial_s(s: dict[str, Any]) -> float:
    """Each trial's time budget, as the stage's flags give it."""
    flags = s["flags"]
    return float(flags[flags.index("--time-budget-s") + 1])


def _run_search(ctx: StageContext, command: list[str]) -> int:
    """The search's exit code; ``STOPPED`` when the stage's time ran out (files still kept)."""
    # Ctrl-C's grace inside the stage's time: the plan's command is killed right after it.
    timeout = max(ctx.remaining_s() - _STOP_GRACE_S, 30)
    code = run_stoppable(command, ctx.path("search.log"), timeout, grace_s=_STOP_GRACE_S)
    if code == STOPPED:
        ctx.log(f"the search outran the stage's time ({timeout:.0f} s) and was stopped")
    return code


def _calibrated_budget(ctx: StageContext, s: dict[str, Any]) -> int:
    """A multiple of the peak memory of the space's workload at the calibration batch."""
    from tuner.engine import short_run
    from tuner.spaces import get_space

    workload = dict(get_space(SPACE).workloads[s["workload"]])
    config = TrainConfig.from_params({**workload, **s["calibration"], "device": ctx.device})
    peak = short_run(config, steps=2).peak_memory_bytes
    ctx.log(f"calibration: peak {format_bytes(peak)} at batch {config.batch_size}")
    return int(s["budget_factor"] * (peak or 0)) or 1


def _keep_experiment_files(ctx: StageContext, experiment: Path) -> Any:
    """Copy the tuner's small experiment files here; the trials as a table (None if absent)."""
    kept = ctx.path("experiment")
    kept.mkdir(exist_ok=True)
    for name in (*TUNER_FILES, RAY_LOG_FILE):  # Ray's log: why an actor died (an H200 run's two)
        if (experiment / name).is_file():
            shutil.copy2(experiment / name, kept / name)
    for error in experiment.glob("*/error.txt"):  # each failed attempt's traceback
        shutil.copy2(error, kept / f"error-{error.parent.name}.txt")
    try:
        from tuner.experiment import load_experiment

        return load_experiment(experiment).trials
    except Exception as exc:  # the stage reports what it can; the log says the rest
        ctx.log(f"the trials could not be read ({type(exc).__name__}: {exc})")
        return None


def _finish(
    ctx: StageContext, command: list[str], code: int, budget_from: tuple[int, str], trials: Any
) -> StageResult:
    from tuner.report.document import Section, Table

    budget, source = budget_from
    report = ctx.path(NAME) / REPORT_FILE
    kinds = trial_kinds(trials)
    # No more finished trials asked for than the search asks for (the dry run's two).
    least = min(int(ctx.options.get("min_trials") or 1), int(settings(ctx)["trials"]))
    ok, line = verdict(code, kinds, least, budget)
    ctx.write_json(
        "search.json",
        {"command": command, "exit_code": code, "max_memory_bytes": budget,
         "max_memory_from": source, "trials": sum(kinds.values()), "kinds": kinds,
         "ok_trials": kinds.get("ok", 0), "report": str(report.relative_to(ctx.out_dir))},
    )  # fmt: skip
    shown = _shown_trials(trials) if trials is not None else None
    outcome = [
        f"{line}.",
        f"Budget: {source}.",
        f"The search's report: [{NAME}/report.md]({NAME}/report.md); its console output: "
        "search.log.",
    ]
    ctx.write_markdown(
        f"A short search: {SPACE} under {format_bytes(budget)}",
        [
            Section("Outcome", outcome),
            Section("Trials", [Table(shown) if shown is not None else "(no trials read)"]),
            Section("Command", [f"`{' '.join(command)}`"]),
        ],
    )
    return StageResult(ok and report.is_file(), line)


def trial_kinds(trials: Any) -> dict[str, int]:
    """How many trials were of each kind (``tuner.record.KINDS``: ok, over budget, incomplete,
    ...), in that order, the kinds with none left out. A trial cut by the search's end before
    it reported is ``incomplete``: it says nothing about the memory budget."""
    from tuner.record import KIND, KINDS

    if trials is None or KIND not in trials:
        return {}
    counts = trials[KIND].value_counts()
    return {k: int(counts[k]) for k in KINDS if counts.get(k, 0)}


def verdict(code: int, kinds: dict[str, int], min_trials: int, budget: int) -> tuple[bool, str]:
    """The stage passes when the search exited 0 or 1, at least one trial is ok and at least
    ``min_trials`` trials finished (ended by themselves: any kind but incomplete)."""
    n = sum(kinds.values())
    finished = n - kinds.get("incomplete", 0)
    told = ", ".join(
        f"{v} over the budget {format_bytes(budget)}" if k == "over budget" else f"{v} {k}"
        for k, v in kinds.items()
    )
    line = f"search exit {code}: {n} trials ({told or 'none read'}), {finished} finished"
    short = ["no trial ok"] if not kinds.get("ok") else []
    if finished < min_trials:
        short.append(f"fewer than {min_trials} finished")
    ok = code in (0, 1) and not short
    return ok, line + (f"; FAIL: {' and '.join(short)}" if short else "")


def _shown_trials(trials: Any) -> Any:
    columns = ["trial_id", "status", "feasible", "infeasible_reason", "images_per_second",
               "val_accuracy", "peak_memory_bytes", "memory_kind"]  # fmt: skip
    shown = trials[[c for c in columns if c in trials]].copy()
    if "peak_memory_bytes" in shown:
        shown["peak_memory_bytes"] = shown["peak_memory_bytes"].map(format_bytes)
    return shown.rename(columns={"peak_memory_bytes": "peak memory"})
