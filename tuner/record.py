"""The trial record: every key a trial reports, declared once (so no two clients of a search
can disagree), and the one classifier of a trial. Three families: the engine's
(:data:`ENGINE_KEYS`, from ``RunResult``'s fields), the search's (:data:`SEARCH_KEYS`, added by
the trainable) and the trials table's (:data:`TABLE_KEYS`, added by the experiment reader);
docs/architecture.md ("The trial record") lists them. Times: a duration is ``<what>_time_s``, a
stamp ``<what>_unix_s``, a date ``<what>_at`` (UTC). Ray-free and Optuna-free.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from tuner.config import bare_type, config_fields, field_type
from tuner.engine.result import DATA_BOUND_WAIT, RunResult
from tuner.objectives import judge, memory_violation
from tuner.techniques import KNOBS
from tuner.units import as_number

__all__ = [
    "COUNT",
    "CURVE_KEYS",
    "EFFECTIVE_PREFIX",
    "ENGINE_KEYS",
    "FLAG",
    "KINDS",
    "NUMBER",
    "SEARCH_KEYS",
    "TABLE_KEYS",
    "TEXT",
    "TIME",
    "Key",
    "Kind",
    "classify",
    "config_dtype",
    "declared_dtype",
    "engine_values",
    "hparams_status",
    "is_candidate",
    "mlflow_status",
    "optuna_state",
    "trial_report",
]

# The dtypes of a trials table (pandas names): counts are nullable integers, measurements
# floats (NaN when missing), text nullable strings, flags nullable booleans, dates UTC.
COUNT, NUMBER, TEXT, FLAG, TIME = "Int64", "float64", "string", "boolean", "datetime64[ms, UTC]"


@dataclass(frozen=True)
class Key:
    """One key of a trial's record: its name, its dtype in the trials table, what it means."""

    name: str
    dtype: str
    meaning: str


def _declare(into: dict[str, Key], name: str, dtype: str, meaning: str) -> str:
    if name in into:
        raise ValueError(f"key {name!r} declared twice")
    into[name] = Key(name, dtype, meaning)
    return name


# ---- the engine's keys: RunResult's scalar fields --------------------------------------------

EFFECTIVE_PREFIX = "effective_"
_NOT_REPORTED = (
    "images_per_second_windows",
    "train_loss_curve",
    "effective",
    "notes",
    "config",
    "error_traceback",  # a file in the trial's folder (tuner.tune.trainable), not a key
)


def _hint_dtype(hint: Any) -> str:
    """int -> counts, float -> numbers, bool -> flags; str, Literal and objects -> text."""
    return {bool: FLAG, int: COUNT, float: NUMBER}.get(bare_type(hint)[0], TEXT)


# What the trials table's leading engine columns mean, in a reader's words (the others: see
# tuner.engine.result.RunResult).
_ENGINE_MEANINGS = {
    "status": "how the engine's run ended: ok | oom | diverged | error",
    "error": "error text of a failed trial (missing when none)",
    "images_per_second": "steady-state training throughput (warm-up and compile excluded)",
    "data_wait_fraction": "share of measured step time spent waiting for the next batch",
    "loader_images_per_second": "the train loader alone, no training, after the trial trained",
    "bound": f"data (steps waited for data >= {DATA_BOUND_WAIT:.0%} of their time) or compute",
    "val_accuracy": "top-1 accuracy on the validation split at the trial's last evaluation",
    "val_loss": "validation loss at the last evaluation",
    "peak_memory_bytes": "peak memory the run held (see memory_kind)",
    "memory_kind": "cuda_max_memory_reserved or cpu_training_state",
    "wall_time_s": "the engine's own wall time of the run (build, compile, train, evaluate)",
    "images_seen": "training images so far, every data-parallel worker's together",
    "train_time_s": "seconds of the training loop so far (evaluations and speed probes excluded)",
    "val_images": "validation images the accuracy was measured on (its binomial n)",
    "planned_steps": "steps the trial's budget holds (its images, steps or epochs; missing: a "
    "budget of training time); a trial that ended with fewer was cut by its time budget",
}


def _engine_keys() -> dict[str, Key]:
    hints = typing.get_type_hints(RunResult)
    keys = {
        f.name: Key(
            f.name,
            _hint_dtype(hints[f.name]),
            _ENGINE_MEANINGS.get(f.name, "the engine's RunResult field of that name"),
        )
        for f in dataclasses.fields(RunResult)
        if f.name not in _NOT_REPORTED
    }
    keys["notes"] = Key("notes", TEXT, "the engine's notes on fallbacks, ' | '-separated")
    return keys


ENGINE_KEYS: dict[str, Key] = _engine_keys()
STATUS = "status"  # RunResult.status: ok | oom | diverged | error
ERROR = "error"
PLANNED_STEPS = "planned_steps"
IMAGES_SEEN, TRAIN_TIME_S, VAL_ACCURACY, VAL_IMAGES = (
    "images_seen",
    "train_time_s",
    "val_accuracy",
    "val_images",
)

# ---- the search's keys: added by the trainable to every tune.report ---------------------------

SEARCH_KEYS: dict[str, Key] = {}
_search_key = functools.partial(_declare, SEARCH_KEYS)
PHASE = _search_key(
    "phase",
    TEXT,
    "feasibility (its feasibility check stopped the run: over the memory budget), train, or "
    "setup (failed before training)",
)
FINAL = _search_key(
    "final",
    FLAG,
    "this report is the trial's last: its run ended (False: an evaluation; a trial whose last "
    "report is not final was stopped early, or has not ended)",
)
STEP = _search_key("step", COUNT, "training step of the report: every logger's x-axis")
FEASIBLE = _search_key(
    "feasible",
    FLAG,
    "ran ok within the memory budget (Optuna's constraint is met); says nothing about whether "
    "it ran to its end: see kind",
)
INFEASIBLE_REASON = _search_key("infeasible_reason", TEXT, "why not feasible")
MEMORY_VIOLATION = _search_key(
    "memory_violation", NUMBER, "Optuna's constraint: (peak - budget) / budget; > 0 is over budget"
)
MAX_MEMORY_BYTES = _search_key("max_memory_bytes", COUNT, "the search's memory budget")
NODE = _search_key("node", TEXT, "host name (or IP) of the node that ran the trial")
ENGINE_TIME_S = _search_key(
    "engine_time_s",
    NUMBER,
    "seconds the trial spent in the engine: speed probes, builds, training, evaluation",
)
TRIAL_TRAIN_TIME_S = _search_key(
    "trial_train_time_s", NUMBER, "seconds in training steps, the speed probes' included"
)
SPEED_CHOICE = _search_key("speed_choice", TEXT, "the speed probes' verdict, in words")
SPEED_PROBE_BUDGET_S = _search_key(
    "speed_probe_budget_s",
    NUMBER,
    "seconds of speed probes this trial was allowed: its share of the trials' time (--probe-share) "
    "and what earlier trials left (NaN: unbounded, or nothing to probe)",
)
SPEED_NOT_PROBED = _search_key(
    "speed_not_probed",
    TEXT,
    "speed knobs the probe budget left at their default (not tried and lost: not tried), "
    "comma-separated",
)
SPEED_PROBE_WAIT_S = _search_key(
    "speed_probe_wait_s",
    NUMBER,
    "wall seconds this trial waited for another trial's speed probes of the same settings",
)
STARVED_BY = _search_key(
    "starved_by",
    TEXT,
    "what cut a trial's run short of its planned_steps: budget (its time budget holds fewer "
    "steps even at its probed speed), budget or machine load (the same, beside at least half a "
    "busy core: machine_load_cores), machine load (its steps ran slower than probed), or unknown",
)
MACHINE_LOAD_CORES = _search_key(
    "machine_load_cores",
    NUMBER,
    "cores other processes kept busy on average while the trial ran: the machine's busy CPU "
    "less the search's own process tree's (tuner.measure.load)",
)
SPEED_SOURCE = _search_key(
    "speed_source",
    TEXT,
    "where the speed settings came from: probed | cache (this experiment's) | machine cache (an "
    "earlier search's on this machine) | not probed",
)
SPEED_CACHE_AGE_S = _search_key(
    "speed_cache_age_s",
    NUMBER,
    "how long ago an earlier search measured the speed settings (speed_source machine cache)",
)
SPEED_SETTINGS = _search_key(
    "speed_settings", TEXT, "the speed settings the run used on top of its parameters (JSON)"
)
SPEED_PROBE_TIME_S = _search_key(
    "speed_probe_time_s",
    NUMBER,
    "wall seconds of this trial's speed probe runs, each from its start to its end (0 from the "
    "cache)",
)
TRIAL_FIRST_STEP_UNIX_S = _search_key(
    "trial_first_step_unix_s", NUMBER, "when the trial's first training step began (probes too)"
)
REPORTED_UNIX_S = _search_key("reported_unix_s", NUMBER, "when the report was made")
TRIAL_STARTED_UNIX_S = _search_key(
    "trial_started_unix_s", NUMBER, "when the trial's trainable began (before probes and build)"
)
RETRIES = _search_key(
    "retries",
    COUNT,
    "how many earlier attempts of this trial failed and were retried from its checkpoint (a "
    "process lost, a rank that died or stalled): 0 when its first attempt is the one reporting",
)
LAST_ERROR = _search_key(
    "last_error", TEXT, "the latest failed attempt's error, one line (retries > 0)"
)

# ---- the trials table's own keys: added by the reader of an experiment folder -----------------

TABLE_KEYS: dict[str, Key] = {}
_table_key = functools.partial(_declare, TABLE_KEYS)
TRIAL_ID = _table_key("trial_id", TEXT, "Ray Tune's trial id")
KIND = _table_key(
    "kind",
    TEXT,
    "what the trial was: ok | stopped early | starved | over budget | diverged | errored | "
    "incomplete; only ok can be recommended",
)
RAY_STATUS = _table_key(
    "ray_status", TEXT, "Ray Tune's trial status (TERMINATED, ERROR, RUNNING, PENDING), if known"
)
REPORTS = _table_key("reports", COUNT, "how many reports the trial made")
TRIAL_DIR = _table_key("trial_dir", TEXT, "the trial's folder in the experiment folder")
TRIAL_TIME_S = _table_key(
    "trial_time_s",
    NUMBER,
    "the trial's whole wall time: from its start to its last report (ended_at - started_at), "
    "less the time the search's driver was down between an interruption and its resume",
)
# An evaluation report's point on the trial's accuracy curve (``Experiment.curves``): one row
# per evaluation, by step, images and training seconds.
CURVE_KEYS: tuple[str, ...] = (TRIAL_ID, STEP, IMAGES_SEEN, TRAIN_TIME_S, VAL_ACCURACY, VAL_IMAGES)
STARTED_AT = _table_key("started_at", TIME, "when the trial's trainable began (UTC)")
ENDED_AT = _table_key("ended_at", TIME, "when the trial last reported (UTC)")

# Time to the target accuracy (tuner.time_to_target): from the trial's own accuracy curve, added
# by the answer once the target is known (given, or derived from the candidates).
TARGET_ACCURACY = _table_key(
    "target_accuracy",
    NUMBER,
    "the validation accuracy every trial's time to target is measured to (--target-accuracy, or "
    "derived: the report's answer says how)",
)
IMAGES_TO_TARGET = _table_key(
    "images_to_target",
    NUMBER,
    "images seen at the trial's first evaluation at or above the target (NaN: never reached)",
)
IMAGES_TO_TARGET_LOW = _table_key(
    "images_to_target_low",
    NUMBER,
    "images seen at the evaluation before that one (0: the first reached it): the true crossing "
    "lies between the two",
)
TRAIN_TIME_TO_TARGET_S = _table_key(
    "train_time_to_target_s",
    NUMBER,
    "the stopwatch's time to target: training-loop seconds at that evaluation, as the trial ran "
    "(machine load and trials beside it included)",
)
TIME_TO_TARGET_EST_S = _table_key(
    "estimated_time_to_target_s",
    NUMBER,
    "images_to_target / images_per_second (re-measured where it was): the load-independent time "
    "to target the answer decides with",
)
TIME_TO_TARGET_EST_LOW = _table_key(
    "estimated_time_to_target_s_low",
    NUMBER,
    "its lower bound: images_to_target_low / the throughput interval's upper end",
)
TIME_TO_TARGET_EST_HIGH = _table_key(
    "estimated_time_to_target_s_high",
    NUMBER,
    "its upper bound: images_to_target / the throughput interval's lower end",
)
TIME_TO_TARGET_SOURCE = _table_key(
    "time_to_target_source",
    TEXT,
    "where the estimate's images/s came from: re-measured | search (one figure, no interval)",
)


def declared_dtype(name: str) -> str | None:
    """The dtype of a trials-table column declared here (``effective_<field>`` included), or
    ``None`` for a column this record does not declare (``param_<name>``: the caller's)."""
    for family in (TABLE_KEYS, SEARCH_KEYS, ENGINE_KEYS):
        if name in family:
            return family[name].dtype
    field = name.removeprefix(EFFECTIVE_PREFIX)
    if name.startswith(EFFECTIVE_PREFIX) and field in {k.field for k in KNOBS}:
        return config_dtype(field)
    return None


def config_dtype(field: str) -> str | None:
    """The trials-table dtype of a ``TrainConfig`` field's values (``None``: no such field)."""
    return _hint_dtype(field_type(field)[0]) if field in config_fields() else None


# ---- what a trial was ------------------------------------------------------------------------

Kind = Literal["ok", "stopped early", "starved", "over budget", "diverged", "errored", "incomplete"]
KINDS: tuple[str, ...] = get_args(Kind)
# How Optuna is told each kind (state names of optuna.trial.TrialState). Only ok is COMPLETE:
# an objective value is what a trial measured to its end, and a COMPLETE trial is on the front
# of any client that ignores constraints (optuna-dashboard). Over budget is PRUNED with its
# measured violation > 0 as its constraint (TPE ranks it infeasible, so the sampler still
# learns the region; GP and NSGA-II read COMPLETE trials only); a trial stopped early is
# PRUNED too (its accuracy so far is not its accuracy), and so is a starved trial (it ended by its
# time budget before the steps of its budget: it did not train what the others did).
_OPTUNA_STATES: dict[str, str] = {
    "ok": "COMPLETE",
    "over budget": "PRUNED",
    "stopped early": "PRUNED",
    "starved": "PRUNED",
    "diverged": "FAIL",
    "errored": "FAIL",
    "incomplete": "FAIL",
}


def classify(report: Mapping[str, Any] | None, *, ended: bool, crashed: bool = False) -> Kind:
    """What a trial was, from its last report (None: it never reported); ``ended``: it will
    report no more; ``crashed``: its process raised after (or before) its last report."""
    report = report or {}
    status = str(report.get(STATUS) or "")
    if status == "error" or (crashed and status in ("", "ok")):
        return "errored"
    if status == "diverged":
        return "diverged"
    if status == "oom" or as_number(report.get(MEMORY_VIOLATION)) > 0:
        return "over budget"
    if status != "ok" or not ended:
        return "incomplete"
    if report.get(FINAL) is not True:
        return "stopped early"
    return "starved" if is_starved(report) else "ok"


def is_starved(report: Mapping[str, Any]) -> bool:
    """Whether a trial that ran to its end trained fewer steps than its budget holds: its time
    budget (a safety cap) cut it, so it is not compared with the others as if it had not. A
    budget of training time has no planned steps: such a trial is never starved."""
    planned, steps = as_number(report.get(PLANNED_STEPS)), as_number(report.get(STEP))
    if not math.isfinite(planned):  # a folder from before planned_steps: its first rung's steps
        planned = as_number(report.get(_LEGACY_FIRST_RUNG_STEPS))
    return math.isfinite(planned) and math.isfinite(steps) and steps < planned


_LEGACY_FIRST_RUNG_STEPS = "first_rung_steps"  # no longer reported; read in older folders


def is_candidate(kind: str) -> bool:
    """Whether a trial of this kind can be recommended (it ran to its end, ok, within budget)."""
    return kind == "ok"


def optuna_state(kind: str) -> str:
    """The Optuna ``TrialState`` name a trial of this kind is told as."""
    return _OPTUNA_STATES[kind]


def hparams_status(kind: str) -> str:
    """The TensorBoard HParams status of a trial of this kind: failed (Optuna FAIL) is a
    failure, cut by the search's end unknown, any other kind ran as meant: a success."""
    if kind == "incomplete":
        return "STATUS_UNKNOWN"
    return "STATUS_FAILURE" if optuna_state(kind) == "FAIL" else "STATUS_SUCCESS"


def mlflow_status(kind: str) -> str:
    """The MLflow run status of a trial of this kind (as :func:`hparams_status`)."""
    if kind == "incomplete":
        return "KILLED"
    return "FAILED" if optuna_state(kind) == "FAIL" else "FINISHED"


# ---- one report -------------------------------------------------------------------------------


def engine_values(result: RunResult | Mapping[str, Any]) -> dict[str, Any]:
    """The engine's keys of a report: RunResult's scalar fields (NaN / "" when missing),
    ``effective_<field>`` per knob and the notes as one string."""
    values = result.to_dict() if isinstance(result, RunResult) else dict(result)
    report: dict[str, Any] = {}
    for name, key in ENGINE_KEYS.items():
        value = values.get(name)
        report[name] = (
            ("" if value is None else str(value)) if key.dtype == TEXT else as_number(value)
        )
    effective = values.get("effective") or {}
    for knob in KNOBS:
        value = effective.get(knob.field)
        report[EFFECTIVE_PREFIX + knob.field] = "" if value is None else _flat(value)
    report["notes"] = " | ".join(values.get("notes") or [])
    return report


def trial_report(
    result: RunResult | Mapping[str, Any],
    *,
    max_memory_bytes: int | None,
    phase: str,
    node: str,
    final: bool,
    counters: Mapping[str, Any],
    retries: int = 0,
    last_error: str = "",
) -> dict[str, Any]:
    """Everything one ``tune.report`` carries, every key of :data:`SEARCH_KEYS` included;
    ``counters``: the trial's timings and speed keys by their record keys."""
    report = engine_values(result)
    feasible, reason = judge(report, max_memory_bytes=max_memory_bytes)
    steps = as_number(report.get("steps"))
    report |= {
        PHASE: phase,
        FINAL: final,
        STEP: int(steps) if math.isfinite(steps) else 0,
        FEASIBLE: feasible,
        INFEASIBLE_REASON: reason,
        MEMORY_VIOLATION: memory_violation(report, max_memory_bytes=max_memory_bytes),
        MAX_MEMORY_BYTES: as_number(max_memory_bytes),
        NODE: node,
        REPORTED_UNIX_S: time.time(),  # Ray's own timestamp has whole seconds only
        RETRIES: retries,
        LAST_ERROR: last_error,
    }
    for name, key in SEARCH_KEYS.items():  # the counters, NaN / "" when missing
        if name not in report:
            value = counters.get(name)
            report[name] = str(value or "") if key.dtype == TEXT else as_number(value)
    return report


def _flat(value: Any) -> Any:
    """A value Ray's loggers store as a scalar (bool/int/float/str)."""
    return value if isinstance(value, bool | int | float | str) else str(value)
