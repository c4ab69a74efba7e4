"""After the trials: the re-measurement, seed retraining and technique effects, each in one Ray
task holding a trial's CPUs and a whole GPU (nothing else shares the device), with a heartbeat;
the measuring is :mod:`tuner.compare`.
"""

from __future__ import annotations

import csv
import math
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd
import ray
import torch

from tuner.answer import Answer, candidates, to_remeasure
from tuner.compare import plan_toggles, seeds, trust
from tuner.compare.seeds import SEED_COLUMNS, SEEDS
from tuner.compare.trust import Budget
from tuner.engine.build import resolve_device
from tuner.experiment import EFFECTS_FILE, REMEASURE_FILE, SEEDS_FILE, Experiment
from tuner.measure import budget_text, ended_text
from tuner.measure.load import LoadMeter
from tuner.objectives import objectives_of, rank_candidates
from tuner.record import TRIAL_ID
from tuner.spaces import train_config_of
from tuner.tune.progress import wait_with_heartbeat
from tuner.units import duration_text
from tuner.usercode import registered, restore

if TYPE_CHECKING:
    from tuner.tune.context import SearchContext
    from tuner.tune.plan import SearchPlan

__all__ = ["effects_around", "remeasure_candidates", "seeds_around"]

REMEASURE_STEPS = 20  # a fresh build's measured steps (CUDA) ...
WINDOW_STEPS = 10  # ... and a window's, of one build (CPU: tuner.compare.trust)
_RUN_OVERHEAD_S = 3.0  # building a run (data, model) before its measured steps, about


def remeasure_candidates(
    search: SearchContext, experiment: Experiment, time_limit_s: float | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Re-measure the top candidates; the failed ones (the metadata's ``remeasure_failures``)
    and how the measurement ended (``None``: nothing was written)."""
    options = search.options
    if options.objective == "pareto":  # both ends of the front and the rule's pick, always
        top, note = to_remeasure(experiment, top=options.remeasure_top)
        if note:
            print(note, flush=True)
    else:
        objs = objectives_of(options.objective)
        top = rank_candidates(candidates(experiment.trials, objs), objs, top=options.remeasure_top)
    if top.empty:
        return [], None
    budget = Budget(options.remeasure_repeats, options.remeasure_max_repeats, time_limit_s)
    print(
        f"Re-measuring throughput of the top {len(top)} candidate(s) alone, {_how(budget)}",
        flush=True,
    )
    ids = [str(tid) for tid in top[TRIAL_ID]]
    task = _task(search)
    expected_s = _expected_s(budget, len(ids) * _run_s(top, task.steps))
    try:
        configs = [experiment.configs[tid] for tid in ids]
        rows, info = _in_task(
            _remeasure, task, configs, budget, what="re-measuring", expected_s=expected_s
        )
    except Exception as exc:  # the task itself died: every candidate keeps its search numbers
        error = _task_error(exc)
        return _say_failures([{TRIAL_ID: tid, "error": error} for tid in ids], len(ids)), None
    rows = [{TRIAL_ID: ids[r["candidate"]], "rank": r["candidate"] + 1, **r} for r in rows]
    with (search.paths.local / REMEASURE_FILE).open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=REMEASURE_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    print(f"  {_ended(info)}", flush=True)
    return _say_failures(_failures(rows), len(ids)), info


def effects_around(
    search: SearchContext,
    experiment: Experiment,
    answer: Answer,
    time_limit_s: float | None = None,
) -> dict[str, Any]:
    pick, repeats = answer.recommended, search.options.effects_repeats
    if repeats < 1 or pick is None:
        return {}
    trial_id = str(pick[TRIAL_ID])
    budget = Budget(min(8, repeats), repeats, time_limit_s)
    print(
        f"Measuring each technique's effect around the recommended config {trial_id}, "
        f"{_how(budget)}",
        flush=True,
    )
    pick_row = experiment.trials[experiment.trials[TRIAL_ID] == trial_id]
    config, task = experiment.configs[trial_id], _task(search)
    arms = _effect_arms(config, search.plan, search.search_only)
    expected_s = _expected_s(budget, arms * _run_s(pick_row, task.steps)) or None
    try:
        what = "measuring technique effects"
        rows, info = _in_task(_effects, task, config, budget, what=what, expected_s=expected_s)
        pd.DataFrame(rows).to_csv(search.paths.local / EFFECTS_FILE, index=False)
    except Exception as exc:  # the task died: the search's results and answer stand without it
        error = _task_error(exc)
        print(f"warning: the technique effects failed ({error}); the answer stands without them.")
        return {"effects": {TRIAL_ID: trial_id, "error": error}}
    print(f"  {_ended(info)}", flush=True)
    return {"effects": {TRIAL_ID: trial_id, **info}}


def seeds_around(
    search: SearchContext,
    experiment: Experiment,
    answer: Answer,
    time_limit_s: float | None = None,
) -> dict[str, Any]:
    """The answer's picks and the recommended pick's plain loop retrained with new seeds:
    ``seeds.csv``, and the metadata's ``seeds`` (its ``short`` says why fewer than 3 ran)."""
    pick = answer.recommended
    if pick is None:
        return {}
    recommended = str(pick[TRIAL_ID])
    picks = [recommended, *(str(row[TRIAL_ID]) for row in answer.best.values())]
    ids = list(dict.fromkeys(picks))  # the rule's pick is not always best on one objective
    arms = seeds.seed_arms({tid: answer.configs[tid] for tid in ids}, recommended)
    round_s = sum(_trial_run_s(experiment.trials, arm.trial_id) for arm in arms)
    limit = (
        ""
        if time_limit_s is None
        else f"; its share of the trust budget {duration_text(time_limit_s)}, which {SEEDS} "
        "seeds, the fewest that say anything, may outlast"
    )
    plain = f" and the plain loop of {recommended}" if len(arms) > len(ids) else ""
    print(
        f"Retraining the pick(s) {', '.join(ids)}{plain} with {SEEDS} new seeds each, "
        f"interleaved, each run the trial's own budget (about {round_s:.0f} s a round){limit} ...",
        flush=True,
    )
    configs = {tid: experiment.configs[tid] for tid in ids}
    args = (configs, recommended, time_limit_s, round_s, search.options.seed)
    expected_s = round_s * SEEDS  # its minimum, run even past the time limit
    try:
        what = "retraining with seeds"
        rows, info = _in_task(_retrain, _task(search), *args, what=what, expected_s=expected_s)
    except Exception as exc:  # the task died: the answer stands on the trials' own accuracy
        error = _task_error(exc)
        print(
            f"warning: the seed retraining failed ({error}); the accuracy intervals are the "
            "validation sample's alone.",
            flush=True,
        )
        return {"seeds": {"error": error}}
    pd.DataFrame(rows, columns=SEED_COLUMNS).to_csv(search.paths.local / SEEDS_FILE, index=False)
    print(f"  {_ended(info)}", flush=True)
    if info.get("over_s"):
        print(
            f"  {SEEDS} seeds are the fewest that say anything of their spread: they ran "
            f"{duration_text(info['over_s'])} past the trust budget's share.",
            flush=True,
        )
    if info.get("short"):
        print(f"warning: {info['short']}.", flush=True)
    return {"seeds": info}


def _trial_run_s(trials: pd.DataFrame, trial_id: str) -> float:
    row = trials[trials[TRIAL_ID].astype(str) == trial_id]
    seconds = sum(
        float(row[key].iloc[0])
        for key in ("train_time_s", "eval_time_s")
        if key in row and len(row)
    )
    return (seconds if math.isfinite(seconds) else 0.0) + _RUN_OVERHEAD_S


def _task_error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:200]}"


def _how(budget: Budget) -> str:
    limit = "" if budget.time_limit_s is None else f", within {duration_text(budget.time_limit_s)}"
    return (
        f"interleaved, {budget.min_repeats} to {budget.max_repeats} rounds until every "
        f"interval is within +-{budget.resolution:.0%}{limit} ..."
    )


def _ended(info: dict[str, Any]) -> str:
    rounds = info.get("repeats_done", 0)
    spent = budget_text(info)  # how long on the clock; over its limit: by how much
    ended = f"{rounds} rounds, ended by {ended_text(info)}"
    return f"{ended} ({spent})." if spent else f"{ended}."


@dataclass(frozen=True)
class _Task:
    num_cpus: float
    num_gpus: float
    threads: int
    device: str
    steps: int  # measured steps of a fresh build (CUDA) or of a window (CPU)
    search_only: tuple[str, ...]
    user_objects: dict[str, Any]  # a notebook's model/data (``@name``), carried by value


def _task(search: SearchContext) -> _Task:
    plan = search.plan
    steps = max(REMEASURE_STEPS if plan.cuda else WINDOW_STEPS, search.options.probe_steps)
    gpus = 1.0 if plan.gpus_per_trial > 0 else 0.0
    return _Task(
        plan.cpus_per_trial,
        gpus,
        plan.torch_threads,
        plan.trial_device,
        steps,
        search.search_only,
        registered(),
    )


def _in_task(
    measure: Callable[..., Any], task: _Task, *args: Any, what: str, expected_s: float | None
) -> Any:
    remote = ray.remote(num_cpus=task.num_cpus, num_gpus=task.num_gpus, max_retries=0)(_with_load)
    started = time.time()
    pending = remote.remote(measure, *args, task)
    rows, info = wait_with_heartbeat(pending, what=what, expected_s=expected_s)
    # The phase on the clock, as the console's lines show it: the task's start and builds too,
    # which the measurement's own seconds leave out.
    return rows, {**info, "started_unix_s": started, "ended_unix_s": time.time()}


def _with_load(measure: Callable[..., Any], *args: Any) -> Any:
    """``measure(*args)`` and the other processes' load meanwhile (the report states it)."""
    load = LoadMeter.start()
    rows, info = measure(*args)
    return rows, {**info, "load_cores": load.other_cores()}


def _expected_s(budget: Budget, round_s: float) -> float:
    """About how long a measurement takes: a third of the way from the fewest rounds to the most
    (most stop early), or its time limit."""
    rounds = budget.min_repeats + (budget.max_repeats - budget.min_repeats) / 3 + 1
    expected = rounds * round_s
    return expected if budget.time_limit_s is None else min(expected, budget.time_limit_s)


def _effect_arms(config: dict[str, Any], plan: SearchPlan, search_only: Collection[str]) -> int:
    try:
        base = train_config_of(config, device=plan.trial_device, search_only=search_only)
        return len(plan_toggles(base, cuda=plan.cuda)[0])
    except Exception:  # an estimate only: the task itself reports what it could not build
        return 0


def _run_s(top: Any, steps: int) -> float:
    batch = top.get("param_batch_size", top.get("batch_size"))
    speed = top.get("images_per_second")
    if batch is None or speed is None:
        return _RUN_OVERHEAD_S
    seconds = (batch.astype(float) / speed.astype(float)).mean() * steps
    return seconds if math.isfinite(seconds) else _RUN_OVERHEAD_S


def _failures(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    runs = Counter(str(row[TRIAL_ID]) for row in rows)
    failed: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.get("status") != "ok":
            trial_id = str(row[TRIAL_ID])
            error = str(row.get("error") or row.get("status"))
            entry = failed.setdefault(trial_id, {TRIAL_ID: trial_id, "error": error})
            entry["failed_runs"] = entry.get("failed_runs", 0) + 1
            entry["runs"] = runs[trial_id]
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


def _remeasure(
    configs: list[dict[str, Any]], budget: Budget, task: _Task
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    train_configs = [_train_config(c, task) for c in configs]
    return trust.remeasure(
        train_configs, steps=task.steps, budget=budget, cuda=_cuda(train_configs)
    )


def _effects(
    config: dict[str, Any], budget: Budget, task: _Task
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    base = _train_config(config, task)
    runs, info = trust.effects(base, cuda=_cuda([base]), steps=task.steps, budget=budget)
    return runs.to_dict(orient="records"), info


def _retrain(
    configs: dict[str, dict[str, Any]],
    recommended: str,
    time_limit_s: float | None,
    round_s: float,
    first_seed: int,
    task: _Task,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    picks = {trial_id: _train_config(params, task) for trial_id, params in configs.items()}
    arms = seeds.seed_arms(picks, recommended)
    return seeds.retrain(arms, first_seed=first_seed, time_limit_s=time_limit_s, round_s=round_s)


def _cuda(configs: Sequence[Any]) -> bool:
    return any(resolve_device(c.device).type == "cuda" for c in configs)


def _train_config(params: dict[str, Any], task: _Task) -> Any:
    torch.set_num_threads(max(1, task.threads))
    restore(task.user_objects)
    return train_config_of(params, device=task.device, search_only=task.search_only)
