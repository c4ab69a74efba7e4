"""After the trials: re-measure the top candidates and the technique effects, in Ray tasks.

The measuring is :mod:`tuner.compare.trust` (the one interleaving loop and pairing, no Ray);
here each runs in one Ray task holding a trial's CPUs and a whole GPU, so nothing else shares
the device, and its rows become ``remeasure.csv`` and ``effects.csv``. While a task runs, the
console gets a heartbeat with an estimate of the time left; a candidate whose re-measurement
failed is named in the console and in the metadata (``remeasure_failures``).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.answer import Answer, candidates
from tuner.experiment import EFFECTS_FILE, REMEASURE_FILE, Experiment
from tuner.objectives import objectives_of, rank_candidates
from tuner.record import TRIAL_ID

if TYPE_CHECKING:
    from tuner.search.experiment import ExperimentPaths
    from tuner.search.options import SearchOptions
    from tuner.search.plan import SearchPlan

__all__ = [
    "REMEASURE_COLUMNS",
    "REMEASURE_STEPS",
    "effects_around",
    "measure_effects",
    "remeasure",
    "remeasure_candidates",
    "write_remeasure_csv",
]

REMEASURE_STEPS = 20
_RUN_OVERHEAD_S = 3.0  # building a run (data, model) before its measured steps, about


def remeasure_candidates(
    options: SearchOptions,
    plan: SearchPlan,
    paths: ExperimentPaths,
    experiment: Experiment,
    search_only: tuple[str, ...],
) -> tuple[list[dict[str, Any]], bool]:
    """Re-measure the top candidates; the failed ones (``[{trial_id, error, failed_runs,
    runs}]``, for the metadata's ``remeasure_failures``) and whether it wrote re-measurements."""
    objs = objectives_of(options.objective)
    top = rank_candidates(candidates(experiment.trials, objs), objs, top=options.remeasure_top)
    if top.empty:
        return [], False
    print(
        f"Re-measuring throughput of the top {len(top)} candidate(s) alone, interleaved, "
        f"{options.remeasure_repeats} to {options.remeasure_max_repeats} repeats ...",
        flush=True,
    )
    steps = max(REMEASURE_STEPS, options.probe_steps)
    runs = len(top) * (options.remeasure_repeats + 1)  # + the warm-up round
    ids = [str(tid) for tid in top[TRIAL_ID]]
    try:
        rows = remeasure(
            [(tid, experiment.configs[tid]) for tid in ids],
            steps=steps,
            min_repeats=options.remeasure_repeats,
            max_repeats=options.remeasure_max_repeats,
            num_cpus=plan.cpus_per_trial,
            threads=plan.torch_threads,
            num_gpus=1.0 if plan.gpus_per_trial > 0 else 0.0,  # a whole GPU: no sharing here
            device=plan.trial_device,
            search_only=search_only,
            expected_s=runs * _run_s(top, steps),
        )
    except Exception as exc:  # the task itself died: every candidate keeps its search numbers
        error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:200]}"
        return _say_failures([{TRIAL_ID: tid, "error": error} for tid in ids], len(ids)), False
    write_remeasure_csv(rows, paths.local / REMEASURE_FILE)
    return _say_failures(_failures(rows), len(ids)), True


def effects_around(
    options: SearchOptions,
    plan: SearchPlan,
    paths: ExperimentPaths,
    experiment: Experiment,
    answer: Answer,
    search_only: tuple[str, ...],
) -> dict[str, Any]:
    """The technique effects around the recommended config, as the metadata records them."""
    pick = answer.recommended
    if options.effects_repeats < 1 or pick is None:
        return {}
    trial_id = str(pick[TRIAL_ID])
    print(
        f"Measuring each technique's effect around the recommended config {trial_id}, "
        f"{options.effects_repeats} interleaved repeats ...",
        flush=True,
    )
    steps = max(REMEASURE_STEPS, options.probe_steps)
    pick_row = experiment.trials[experiment.trials[TRIAL_ID] == trial_id]
    runs = _effect_arms(experiment.configs[trial_id], plan, search_only)
    try:
        info = measure_effects(
            experiment.configs[trial_id],
            expected_s=runs * (options.effects_repeats + 1) * _run_s(pick_row, steps) or None,
            steps=steps,
            repeats=options.effects_repeats,
            num_cpus=plan.cpus_per_trial,
            num_gpus=1.0 if plan.gpus_per_trial > 0 else 0.0,
            threads=plan.torch_threads,
            device=plan.trial_device,
            search_only=search_only,
            out=paths.local / EFFECTS_FILE,
        )
    except Exception as exc:  # the task died: the search's results and answer stand without it
        error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:200]}"
        print(f"warning: the technique effects failed ({error}); the answer stands without them.")
        return {"effects": {TRIAL_ID: trial_id, "error": error}}
    return {"effects": {TRIAL_ID: trial_id, **info}}


def _effect_arms(config: dict[str, Any], plan: SearchPlan, search_only: Collection[str]) -> int:
    """How many arms the effects step measures around ``config`` (0 when unknown): for its
    estimate of the time left."""
    from tuner.compare import plan_toggles
    from tuner.spaces import train_config_of

    try:
        base = train_config_of(config, device=plan.trial_device, search_only=search_only)
        return len(plan_toggles(base, cuda=plan.cuda)[0])
    except Exception:  # an estimate only: the task itself reports what it could not build
        return 0


def _run_s(top: Any, steps: int) -> float:
    """About how long one re-measuring run takes, from the candidates' speed in the search."""
    batch = top.get("param_batch_size", top.get("batch_size"))
    speed = top.get("images_per_second")
    if batch is None or speed is None:
        return _RUN_OVERHEAD_S
    seconds = (batch.astype(float) / speed.astype(float)).mean() * steps
    return _RUN_OVERHEAD_S + (seconds if math.isfinite(seconds) else 0.0)


def _failures(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per candidate with a failed re-measuring run: its first error and how many failed."""
    failed: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.get("status") == "ok":
            continue
        entry = failed.setdefault(
            str(row[TRIAL_ID]),
            {TRIAL_ID: str(row[TRIAL_ID]), "error": str(row.get("error") or row.get("status"))},
        )
        entry["failed_runs"] = entry.get("failed_runs", 0) + 1
    for entry in failed.values():
        entry["runs"] = sum(1 for row in rows if str(row[TRIAL_ID]) == entry[TRIAL_ID])
    return list(failed.values())


def _say_failures(failures: list[dict[str, Any]], total: int) -> list[dict[str, Any]]:
    if failures:
        named = "; ".join(f"{f[TRIAL_ID]} ({f['error'][:120]})" for f in failures)
        print(
            f"warning: re-measurement failed for {len(failures)} of {total} candidate(s): "
            f"{named}. A candidate without a finished re-measurement keeps the numbers "
            "measured in the search.",
            flush=True,
        )
    return failures


REMEASURE_COLUMNS = [
    TRIAL_ID,
    "rank",
    "repeat",
    "status",
    "images_per_second",
    "images_per_second_low",
    "images_per_second_high",
    "step_time_s",
    "peak_memory_bytes",
    "memory_kind",
    "measured_steps",
    "device",
    "error",
]


def remeasure(
    candidates: Sequence[tuple[str, dict[str, Any]]],
    *,
    steps: int,
    min_repeats: int,
    max_repeats: int,
    num_cpus: float,
    threads: int,
    num_gpus: float,
    device: str,
    search_only: Collection[str],
    expected_s: float | None = None,
) -> list[dict[str, Any]]:
    """Re-measure ``(trial_id, trial config)`` pairs in one Ray task; one row per repeat."""
    import ray

    from tuner.search.progress import wait_with_heartbeat

    task = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)(_remeasure)
    configs = [config for _, config in candidates]
    names = sorted(search_only)
    ref = task.remote(configs, steps, min_repeats, max_repeats, device, threads, names)
    rows = wait_with_heartbeat(ref, what="re-measuring", expected_s=expected_s)
    return [
        {TRIAL_ID: candidates[row["candidate"]][0], "rank": row["candidate"] + 1, **row}
        for row in rows
    ]


def write_remeasure_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=REMEASURE_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def measure_effects(
    config: dict[str, Any],
    *,
    steps: int,
    repeats: int,
    num_cpus: float,
    num_gpus: float,
    threads: int,
    device: str,
    search_only: Collection[str],
    out: Path,
    expected_s: float | None = None,
) -> dict[str, Any]:
    """Measure the arms around ``config`` (a trial's config) in one Ray task; write ``out``.

    Returns:
        ``{"arms": [...], "left_out": [...], "dropped": [...]}`` for the experiment metadata.
    """
    import pandas as pd
    import ray

    from tuner.search.progress import wait_with_heartbeat

    task = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)(_effects)
    ref = task.remote(config, steps, repeats, device, threads, sorted(search_only))
    rows, info = wait_with_heartbeat(ref, what="measuring technique effects", expected_s=expected_s)
    pd.DataFrame(rows).to_csv(out, index=False)
    return info


def _remeasure(
    configs: list[dict[str, Any]],
    steps: int,
    min_repeats: int,
    max_repeats: int,
    device: str,
    threads: int,
    search_only: list[str],
) -> list[dict[str, Any]]:
    from tuner.compare import trust

    train_configs = [_train_config(c, device, threads, search_only) for c in configs]
    return trust.remeasure(
        train_configs, steps=steps, min_repeats=min_repeats, max_repeats=max_repeats
    )


def _effects(
    config: dict[str, Any],
    steps: int,
    repeats: int,
    device: str,
    threads: int,
    search_only: list[str],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from tuner.compare import trust
    from tuner.engine.build import resolve_device

    base = _train_config(config, device, threads, search_only)
    cuda = resolve_device(base.device).type == "cuda"
    runs, info = trust.effects(base, cuda=cuda, steps=steps, repeats=repeats)
    return runs.to_dict(orient="records"), info


def _train_config(params: dict[str, Any], device: str, threads: int, search_only: list[str]) -> Any:
    """A trial's config as this task runs it (on its CPU threads; on the CPU where asked)."""
    import torch

    from tuner.spaces import train_config_of

    torch.set_num_threads(max(1, threads))
    return train_config_of(params, device=device, search_only=search_only)
