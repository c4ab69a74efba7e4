"""Experiment folder -> pandas: one row per trial, read from files only (never Ray, never pickle).

What the folder holds is declared in :mod:`tuner.experiment_files`. Only JSON, CSV and the
SQLite study are read: pickles (``error.pkl``, checkpoints) are never loaded, so a report can be
made from an experiment someone else sent you.

Columns of :func:`load_trials` (see :data:`TRIAL_COLUMNS`) come first, then every other scalar
metric the trainable reported, then ``param_<name>`` for each searched or derived setting.

Nothing is lost and nothing is guessed silently; what could not be read is listed in
:attr:`Experiment.problems`, one line each:

- Ray's trial states come from the experiment state file Ray itself would resume from (the
  greatest ``experiment_state-<start time>.json`` name; never the newest modification time,
  which races after a resume). A trial whose last result carries tuner's own ``final`` marker
  is finished, whatever Ray's state says.
- A damaged ``result.json`` line is skipped, and the trial keeps its last valid result. When
  the lost line was the final report and the Optuna study holds the trial's final values, they
  are taken from the study; when the study and ``result.json`` disagree, that is listed.

Every column has one dtype (:func:`trial_dtypes`, declared in :data:`TRIAL_DTYPES`): counts are
nullable integers (``Int64``), measurements ``float64`` (NaN when missing), text ``string``
(missing is ``<NA>``, never ""), flags ``boolean`` and times ``datetime64[ms, UTC]``.
``trials.parquet`` keeps them; CSV cannot, so :func:`read_trials_csv` restores them from a
``trials.csv`` written by :func:`write_trials_csv`.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.experiment_files import (
    EFFECTS_FILE,
    ERROR_FILE,
    METADATA_FILE,
    PARAMS_FILE,
    PROBE_CACHE_FILE,
    RAY_STATE_GLOB,
    REMEASURE_FILE,
    RESULT_FILE,
    STUDY_FILE,
    STUDY_TRIAL_ID_ATTR,
)
from tuner.objectives import usable
from tuner.units import as_number

__all__ = [
    "TRIAL_COLUMNS",
    "TRIAL_DTYPES",
    "Experiment",
    "load_experiment",
    "load_study",
    "load_trials",
    "read_trials_csv",
    "resolve_experiment",
    "speed_settings_of",
    "trial_dtypes",
    "typed_trials",
    "write_trials_csv",
]

DEFAULT_STORAGE = Path("experiments")

TRIAL_COLUMNS: dict[str, str] = {
    "trial_id": "Ray Tune's trial id",
    "status": "ok | oom | diverged | error (engine), or incomplete | pending (no final result)",
    "feasible": "finished ok, ran to its end, within the memory budget (only these are chosen)",
    "infeasible_reason": "why not feasible (missing when feasible)",
    "images_per_second": "steady-state training throughput (warm-up and compile excluded)",
    "data_wait_fraction": "share of measured step time spent waiting for the next batch",
    "val_accuracy": "top-1 accuracy on the validation split at the trial's last evaluation",
    "val_loss": "validation loss at the last evaluation",
    "peak_memory_bytes": "peak memory the run held (see memory_kind)",
    "memory_kind": "cuda_max_memory_reserved or cpu_training_state",
    "node": "host name (or IP) of the node that ran the trial",
    "wall_time_s": "the trial's whole wall time (Ray's time_total_s; else the engine's)",
    "started_at": "when the trial started, UTC (its first report's time less its run time then)",
    "ended_at": "when the trial last reported, UTC (its last report's time)",
    "error": "error text of a failed trial (missing when none)",
    "ray_status": "Ray Tune's trial status (TERMINATED, ERROR, RUNNING, PENDING), if known",
    "reports": "how many results the trial reported (evaluations)",
    "trial_dir": "the trial's folder name inside the experiment folder",
    "effective_<field>": "what actually ran for each technique (a fallback shows here)",
    "notes": "the engine's notes on fallbacks, ' | '-separated",
}

# ---- the schema: one dtype per column ----------------------------------------------------------

COUNT, NUMBER, TEXT, FLAG, TIME = "Int64", "float64", "string", "boolean", "datetime64[ms, UTC]"
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # ISO 8601, UTC, as trials.csv writes it

TRIAL_DTYPES: dict[str, str] = {
    # The leading columns (TRIAL_COLUMNS); feasible is never missing.
    "trial_id": TEXT, "status": TEXT, "feasible": "bool", "infeasible_reason": TEXT,
    "images_per_second": NUMBER, "data_wait_fraction": NUMBER, "val_accuracy": NUMBER,
    "val_loss": NUMBER, "peak_memory_bytes": COUNT, "memory_kind": TEXT, "node": TEXT,
    "wall_time_s": NUMBER, "started_at": TIME, "ended_at": TIME, "error": TEXT, "ray_status": TEXT,
    "reports": COUNT, "trial_dir": TEXT, "notes": TEXT,
    # The rest of a report (tuner.search.metrics: the engine's RunResult and the search's keys).
    "images_per_second_low": NUMBER, "images_per_second_high": NUMBER, "step_time_s": NUMBER,
    "measured_steps": COUNT, "peak_memory_allocated_bytes": COUNT,
    "peak_memory_reserved_bytes": COUNT, "memory_parameters_bytes": COUNT,
    "memory_gradients_bytes": COUNT, "memory_optimizer_bytes": COUNT,
    "memory_activations_bytes": COUNT, "val_images": COUNT, "train_loss": NUMBER,
    "time_to_target_s": NUMBER, "steps": COUNT, "epochs": NUMBER, "images_seen": COUNT,
    "train_time_s": NUMBER, "warmup_time_s": NUMBER, "device": TEXT, "device_name": TEXT,
    "torch_version": TEXT, "cuda_version": TEXT, "timm_version": TEXT, "num_parameters": COUNT,
    "phase": TEXT, "final": FLAG, "engine_time_s": NUMBER, "max_memory_bytes": COUNT,
    "memory_violation": NUMBER, "step": COUNT, "first_step_unix_s": NUMBER,
    "skipped_images": COUNT, "world_size": COUNT, "global_batch_size": COUNT,
    # The trial's own keys (tuner.search.trainable): its speed choice and its time.
    "speed_choice": TEXT, "speed_source": TEXT, "speed_probe_seconds": NUMBER,
    "speed_settings": TEXT,
    "training_seconds": NUMBER, "trial_first_step_unix_s": NUMBER, "reported_unix_s": NUMBER,
}  # fmt: skip
# effective_<field> and param_<field> of a TrainConfig field take the field's type.
_SETTING_PREFIXES = ("effective_", "param_")
_SETTING_HINTS: dict[str, Any] = typing.get_type_hints(TrainConfig)

# Ray's bookkeeping keys in result.json that are not metrics.
_RAY_KEYS = {
    "timestamp",
    "checkpoint_dir_name",
    "done",
    "training_iteration",
    "trial_id",
    "date",
    "time_this_iter_s",
    "time_total_s",
    "pid",
    "hostname",
    "node_ip",
    "config",
    "time_since_restore",
    "iterations_since_restore",
    "experiment_tag",
    "should_checkpoint",
}
_UNFINISHED_RAY = {"RUNNING", "PENDING", "PAUSED"}
# Compared between a trial's final result.json line and what the study was told.
_RECONCILED = ("status", "images_per_second", "val_accuracy")


@dataclass(frozen=True)
class Experiment:
    """One experiment folder, read: its metadata, trials table and re-measurements."""

    name: str
    path: Path
    metadata: dict[str, Any]
    trials: pd.DataFrame
    configs: dict[str, dict[str, Any]]  # trial_id -> what it ran: params.json + speed settings
    param_names: list[str]  # searched and derived settings, i.e. the param_<name> columns
    searched_names: list[str] = field(default_factory=list)  # the Optuna distributions
    remeasure: pd.DataFrame | None = None
    effects: pd.DataFrame | None = None  # effects.csv: one row per measurement of each arm
    probe_cache: dict[str, Any] = field(default_factory=dict)  # speed key -> SpeedChoice dict
    study: Any = None  # the Optuna study (an in-memory copy), or None when unreadable
    problems: list[str] = field(default_factory=list)  # what could not be read, one line each

    def problem_lines(self, shown: int = 10) -> list[str]:
        """The short list of what could not be read, for a console ([] when all was read)."""
        if not self.problems:
            return []
        lines = [f"warning: could not read everything in {self.path}:"]
        lines += [f"  {problem}" for problem in self.problems[:shown]]
        if len(self.problems) > shown:
            lines.append(f"  ... and {len(self.problems) - shown} more (the report's Details)")
        return lines


def resolve_experiment(name_or_path: str | Path, storage: str | Path = DEFAULT_STORAGE) -> Path:
    """The experiment folder for a path, or for a name under ``storage``.

    Raises:
        TunerError: neither exists or the folder holds no experiment.
    """
    candidates = [Path(name_or_path), Path(storage) / str(name_or_path)]
    for path in candidates:
        if path.is_dir():
            if not _looks_like_experiment(path):
                raise TunerError(
                    f"{path} is not an experiment folder (no {METADATA_FILE}, {STUDY_FILE} or "
                    "trial folders); give the folder that `tuner search --name` created."
                )
            return path.resolve()
    tried = " nor ".join(dict.fromkeys(str(path) for path in candidates))
    raise TunerError(
        f"No experiment {str(name_or_path)!r}: {tried} does not exist; "
        "give its path or its name under --storage."
    )


def load_experiment(experiment_dir: str | Path) -> Experiment:
    """Read an experiment folder, finished, interrupted or still running.

    Raises:
        TunerError: the folder is missing or its metadata is not valid JSON.
    """
    path = resolve_experiment(experiment_dir)
    metadata = _read_metadata(path)
    name = str(metadata.get("name") or path.name)
    problems: list[str] = []
    study = load_study(path / STUDY_FILE, name)
    if study is None and (path / STUDY_FILE).is_file():
        problems.append(
            f"{STUDY_FILE} could not be read (damaged, or no study {name!r}): the report goes "
            "without it (no reconciliation with result.json, no parameter importance)."
        )
    configs, trials, probed = _read_trials(path, _study_finals(study), problems)
    searched = _searched_names(study, metadata)
    params = _param_names(configs, metadata, searched, probed)
    frame = _trials_frame(trials, configs, params)
    return Experiment(
        name=name,
        path=path,
        metadata=metadata,
        trials=frame,
        configs=configs,
        param_names=params,
        searched_names=searched,
        remeasure=_read_csv(path / REMEASURE_FILE),
        effects=_read_csv(path / EFFECTS_FILE),
        probe_cache=_read_probe_cache(path / PROBE_CACHE_FILE),
        study=study,
        problems=problems,
    )


def load_trials(experiment_dir: str | Path) -> pd.DataFrame:
    """One row per trial: the columns of :data:`TRIAL_COLUMNS`, metrics, ``param_<name>``."""
    return load_experiment(experiment_dir).trials


def load_study(study_db: Path, study_name: str) -> Any:
    """The stored Optuna study, loaded from a temporary copy (the experiment is never written).

    Returns ``None`` when there is no readable study (no file, or another study name).
    """
    if not study_db.is_file():
        return None
    import optuna  # here, so reading a trials table needs no optuna import

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / STUDY_FILE
        shutil.copyfile(study_db, copy)
        storage = optuna.storages.InMemoryStorage()
        try:
            names = optuna.get_all_study_names(f"sqlite:///{copy}")
            name = study_name if study_name in names else (names[0] if len(names) == 1 else None)
            if name is None:
                return None
            optuna.copy_study(
                from_study_name=name, from_storage=f"sqlite:///{copy}", to_storage=storage
            )
        except Exception:  # a half-written or foreign database: report without it
            return None
    return optuna.load_study(study_name=name, storage=storage)


def _looks_like_experiment(path: Path) -> bool:
    if (path / METADATA_FILE).is_file() or (path / STUDY_FILE).is_file():
        return True
    return any(path.glob(f"*/{PARAMS_FILE}")) or any(path.glob(RAY_STATE_GLOB))


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise TunerError(
            f"{path} is not valid JSON ({exc.msg}, line {exc.lineno}); the experiment folder "
            "is corrupt, restore the file or re-run the search."
        ) from None


def _read_metadata(path: Path) -> dict[str, Any]:
    file = path / METADATA_FILE
    data = _read_json(file) if file.is_file() else {}
    if not isinstance(data, dict):
        raise TunerError(f"{file} must hold a JSON object; re-run the search.")
    return data


def _read_probe_cache(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text())
    except (OSError, json.JSONDecodeError):
        return {}  # none (speed probes off, or an older experiment), or damaged
    return data if isinstance(data, dict) else {}


def _read_csv(file: Path) -> pd.DataFrame | None:
    if not file.is_file() or file.stat().st_size == 0:
        return None
    frame = pd.read_csv(file)
    if "trial_id" in frame:
        frame["trial_id"] = frame["trial_id"].astype(str)
    return frame


def _ray_states(path: Path, problems: list[str]) -> dict[str, dict[str, Any]]:
    """trial_id -> {status, relative_logdir, error_filename} from Ray's latest experiment state.

    Latest as Ray orders them when it resumes: the greatest file name (``experiment_state-``
    and the session's start time), not the modification time (after a resume the old and the
    new file are written within a millisecond of each other). A file that is not valid JSON
    (being written) is listed as a problem and the one before it is read instead. The state
    file is JSON; its pickled fields are hex strings that are never unpickled.
    """
    for file in sorted(path.glob(RAY_STATE_GLOB), key=lambda p: p.name, reverse=True):
        try:
            data = json.loads(file.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            problems.append(
                f"{file.name} could not be read ({_reason(exc)}); an older one is used."
            )
            continue
        return _trial_states(data)
    return {}


def _trial_states(data: Any) -> dict[str, dict[str, Any]]:
    states: dict[str, dict[str, Any]] = {}
    for entry in data.get("trial_data", []) if isinstance(data, dict) else []:
        try:
            state, meta = json.loads(entry[0]), json.loads(entry[1])
        except (json.JSONDecodeError, IndexError, TypeError):
            continue
        states[str(state.get("trial_id"))] = {
            "status": str(state.get("status", "")),
            "relative_logdir": state.get("relative_logdir") or "",
            "error_filename": meta.get("error_filename"),
        }
    return states


@dataclass(frozen=True)
class _Results:
    """A trial's result.json, read line by line."""

    last: dict[str, Any]  # the last valid line ({} when none)
    reports: int  # valid lines
    lost_tail: bool  # a damaged line came after the last valid one: the latest report is lost


def _read_results(trial_dir: Path, problems: list[str]) -> _Results:
    """The valid JSON lines of result.json; each damaged line is skipped and listed."""
    file = trial_dir / RESULT_FILE
    if not file.is_file():
        return _Results({}, 0, lost_tail=False)
    last: dict[str, Any] = {}
    reports, lost_tail = 0, False
    text = file.read_text(errors="replace")
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)  # Python's json reads NaN, as Ray writes it
        except json.JSONDecodeError as exc:
            row, reason = None, _reason(exc)
        else:
            reason = "" if isinstance(row, dict) else "not a JSON object"
        if reason:
            where = f"{trial_dir.name}/{RESULT_FILE} line {number}"
            problems.append(f"{where} is damaged ({reason}); skipped.")
            lost_tail = True
            continue
        last, reports, lost_tail = row, reports + 1, False
    return _Results(last, reports, lost_tail)


def _study_finals(study: Any) -> dict[str, dict[str, Any]]:
    """Ray trial id -> the user attributes of its finished Optuna trial (the measurements the
    searcher told the study when the trial completed)."""
    if study is None:
        return {}
    finals: dict[str, dict[str, Any]] = {}
    for trial in study.get_trials(deepcopy=False):
        attrs = trial.user_attrs
        if trial.state.is_finished() and STUDY_TRIAL_ID_ATTR in attrs and "status" in attrs:
            finals[str(attrs[STUDY_TRIAL_ID_ATTR])] = dict(attrs)
    return finals


def _reconcile(
    trial_id: str, results: _Results, told: Mapping[str, Any] | None, problems: list[str]
) -> dict[str, Any]:
    """The trial's result: its last valid line, or what the study was told at the trial's end
    when its final line is damaged; a disagreement between the two is listed."""
    result = dict(results.last)
    final_lost = results.lost_tail and not result.get("final")
    if final_lost and told and told.get("final"):
        measured = {k: v for k, v in told.items() if k != STUDY_TRIAL_ID_ATTR}
        result.update({k: math.nan if v is None else v for k, v in measured.items()})
        problems.append(
            f"trial {trial_id}: its final report is damaged; its final status and "
            f"measurements are taken from {STUDY_FILE}."
        )
    elif final_lost:  # nothing else holds its final values: it keeps its last valid report
        result["infeasible_reason"] = f"its last report in {RESULT_FILE} is damaged"
    elif told and result:
        for key in _RECONCILED:
            if key in told and not _same(result.get(key), told[key]):
                problems.append(
                    f"trial {trial_id}: {RESULT_FILE} and {STUDY_FILE} disagree on {key} "
                    f"({result.get(key)!r} vs {told[key]!r}); the report uses {RESULT_FILE}."
                )
    return result


def _same(a: Any, b: Any) -> bool:
    """Equal; numbers within rounding; missing (None, NaN) only equal to missing."""
    if isinstance(a, str | bool) or isinstance(b, str | bool):
        return a == b
    x, y = as_number(a), as_number(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return math.isclose(x, y, rel_tol=1e-9)


def _read_trials(
    path: Path, finals: Mapping[str, Mapping[str, Any]], problems: list[str]
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]], set[str]]:
    """Each trial's run config and row, and the settings only speed probes chose (in no
    trial's parameters)."""
    states = _ray_states(path, problems)
    dirs = {p.parent.name: p.parent for p in path.glob(f"*/{PARAMS_FILE}")}
    by_dir = {s["relative_logdir"]: tid for tid, s in states.items()}
    configs: dict[str, dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    chosen: set[str] = set()
    given: set[str] = set()
    for name in sorted(dirs, key=_trial_order):
        trial_dir = dirs[name]
        results = _read_results(trial_dir, problems)
        trial_id = str(results.last.get("trial_id") or by_dir.get(name) or _id_from_dirname(name))
        result = _reconcile(trial_id, results, finals.get(trial_id), problems)
        params = _read_params(trial_dir, problems)
        configs[trial_id] = _run_config(params, result)
        given |= set(params)
        chosen |= set(configs[trial_id]) - set(params)
        state = states.pop(trial_id, {})
        row = _trial_row(trial_id, name, trial_dir, result, results.reports, state)
        rows.append({**row, **_trial_times(trial_dir, result)})
    for trial_id, state in states.items():  # known to Ray, but no folder yet
        rows.append(_trial_row(trial_id, "", None, {}, 0, state))
    return configs, rows, chosen - given


def _run_config(params: dict[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    """What the trial ran: its parameters (the space's choices and the fixed workload) with the
    speed settings its probes chose (``speed_settings`` in its reports). A recommendation, a
    re-measurement and the technique effects start from this, not from the parameters alone."""
    return {**params, **speed_settings_of(result.get("speed_settings"))}


def speed_settings_of(value: Any) -> dict[str, Any]:
    """A trial's ``speed_settings`` (JSON text in its reports and in trials.csv) as a dict;
    empty when missing or damaged."""
    try:
        settings = json.loads(value) if isinstance(value, str) and value else {}
    except json.JSONDecodeError:
        return {}
    return settings if isinstance(settings, dict) else {}


def _read_params(trial_dir: Path, problems: list[str]) -> dict[str, Any]:
    file = trial_dir / PARAMS_FILE
    try:
        config = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        problems.append(f"{trial_dir.name}/{PARAMS_FILE} is damaged ({_reason(exc)}).")
        return {}
    return config if isinstance(config, dict) else {}


def _reason(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}"
    return type(exc).__name__


def _trial_order(dirname: str) -> tuple[int, str]:
    parts = dirname.split("_")
    number = next((int(p) for p in parts[2:3] if p.isdigit()), 0)
    return number, dirname


def _id_from_dirname(dirname: str) -> str:
    parts = dirname.split("_")
    return parts[1] if len(parts) > 1 else dirname


def _trial_row(
    trial_id: str,
    dirname: str,
    trial_dir: Path | None,
    result: Mapping[str, Any],
    reports: int,
    state: Mapping[str, Any],
) -> dict[str, Any]:
    ray_status = str(state.get("status", ""))
    metrics = {k: v for k, v in result.items() if k not in _RAY_KEYS and _is_scalar(v)}
    status = _status(metrics, reports, ray_status)
    error = str(metrics.get("error") or "") or _error_text(trial_dir, status)
    # A trial stopped early reported only intermediate results: not a candidate.
    finished = bool(metrics.get("final", True))
    # Ray may not have saved its state since the trial's final report (a killed driver).
    ray_done = "TERMINATED" if _finished(metrics) else ray_status
    feasible = usable({**metrics, "status": status}, ray_status=ray_done)
    reason = "" if feasible else _infeasible_reason(metrics, status, finished=finished)
    wall = result.get("time_total_s", metrics.get("wall_time_s", metrics.get("engine_time_s")))
    node = metrics.get("node") or result.get("hostname") or result.get("node_ip") or ""
    return {
        **metrics,
        "trial_id": trial_id,
        "status": status,
        "feasible": feasible,
        "infeasible_reason": reason,
        "node": str(node),
        "wall_time_s": as_number(wall),
        "error": error,
        "ray_status": ray_status,
        "reports": reports,
        "trial_dir": dirname,
    }


def _status(metrics: Mapping[str, Any], reports: int, ray_status: str) -> str:
    if _finished(metrics):
        return str(metrics["status"])  # its final report, whatever Ray's state file says
    if ray_status == "ERROR" and metrics.get("status") in (None, "ok"):
        return "error"  # the trainable crashed after (or before) its last report
    if ray_status in _UNFINISHED_RAY and metrics.get("status") in (None, "ok"):
        return "pending" if reports == 0 and ray_status == "PENDING" else "incomplete"
    if not reports:
        return "incomplete"
    return str(metrics.get("status") or "incomplete")


def _finished(metrics: Mapping[str, Any]) -> bool:
    """Whether a result is the trial's final report (tuner's own marker), with a status."""
    return metrics.get("final") is True and bool(metrics.get("status"))


def _infeasible_reason(metrics: Mapping[str, Any], status: str, *, finished: bool) -> str:
    reason = str(metrics.get("infeasible_reason") or "")
    if reason:
        return reason
    if status in ("incomplete", "pending"):
        return f"{status}: no final result"
    if not finished:
        return "stopped early: no final result at the full budget"
    return f"status={status}"


def _error_text(trial_dir: Path | None, status: str) -> str:
    if trial_dir is None or status != "error":
        return ""
    file = trial_dir / ERROR_FILE  # text only; error.pkl is never unpickled
    if not file.is_file():
        return ""
    lines = [line for line in file.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _searched_names(study: Any, metadata: Mapping[str, Any]) -> list[str]:
    """The Optuna distributions' names, from the stored study (read from a copy)."""
    if study is None:
        return list(metadata.get("searched_params", []))
    names: dict[str, None] = {}
    for trial in study.get_trials(deepcopy=False):
        names.update(dict.fromkeys(trial.distributions))
    return list(names)


def _param_names(
    configs: Mapping[str, Mapping[str, Any]],
    metadata: Mapping[str, Any],
    searched: list[str],
    probed: set[str],
) -> list[str]:
    """Searched names plus the settings the space derived from them (e.g. lr from base_lr).
    Speed knobs the probes chose are not parameters: ``speed_settings`` holds them."""
    workload = metadata.get("workload")
    names = dict.fromkeys(searched)
    keys = dict.fromkeys(k for config in configs.values() for k in config)
    for key in keys:
        values = {json.dumps(c.get(key), sort_keys=True, default=str) for c in configs.values()}
        fixed = len(values) <= 1 or (isinstance(workload, Mapping) and key in workload)
        if not fixed and key not in probed:
            names[key] = None
    return list(names)


def _trials_frame(
    rows: list[dict[str, Any]], configs: Mapping[str, Mapping[str, Any]], params: list[str]
) -> pd.DataFrame:
    for row in rows:
        config = configs.get(row["trial_id"], {})
        for name in params:
            value = config.get(name)
            row[f"param_{name}"] = value if _is_scalar(value) else json.dumps(value)
    frame = pd.DataFrame(rows)
    leading = [c for c in TRIAL_COLUMNS if "<" not in c]  # effective_<field> names a family
    param_cols = [f"param_{n}" for n in params]
    rest = sorted(c for c in frame if c not in leading and c not in param_cols)
    frame = frame.reindex(columns=leading + rest + param_cols)
    return typed_trials(frame.reset_index(drop=True))


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


# ---- dtypes, times and the CSV file --------------------------------------------------------------


def trial_dtypes(columns: Iterable[str]) -> dict[str, str | None]:
    """The dtype of each column: declared in :data:`TRIAL_DTYPES`, the setting's type for
    ``effective_<field>`` / ``param_<field>`` of a ``TrainConfig`` field, else ``None``: inferred
    from the values as CSV writes them (``True``/``False``: flags, whole numbers: counts, other
    numbers: ``float64``, anything else: text), so a CSV round trip infers the same."""
    return {column: _declared_dtype(column) for column in columns}


def typed_trials(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every column in its dtype (:func:`trial_dtypes`); "" in text is missing."""
    columns = {}
    for column, dtype in trial_dtypes(frame.columns).items():
        values = frame[column]
        columns[column] = _typed(values, dtype or _inferred_dtype(values))
    return pd.DataFrame(columns, index=frame.index, columns=frame.columns)


def write_trials_csv(trials: pd.DataFrame, path: Path) -> None:
    """Write a trials table as CSV (times in ISO 8601, UTC; missing values empty)."""
    trials.to_csv(path, index=False, date_format=_TIME_FORMAT)


def read_trials_csv(path: str | Path) -> pd.DataFrame:
    """Read ``trials.csv`` with every column in its dtype: the same frame as ``trials.parquet``
    (``pandas.read_parquet``) and as :func:`load_trials` made it."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    return typed_trials(frame)


def _declared_dtype(column: str) -> str | None:
    if column in TRIAL_DTYPES:
        return TRIAL_DTYPES[column]
    for prefix in _SETTING_PREFIXES:
        name = column.removeprefix(prefix)
        if column.startswith(prefix) and name in _SETTING_HINTS:
            return _hint_dtype(_SETTING_HINTS[name])
    return None


def _hint_dtype(hint: Any) -> str:
    """int -> counts, float -> numbers, bool -> flags; str, Literal and JSON objects -> text."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    base = args[0] if union and len(args) == 1 else hint
    return {bool: FLAG, int: COUNT, float: NUMBER}.get(base, TEXT)


def _typed(values: pd.Series, dtype: str) -> pd.Series:
    if dtype == TEXT:
        return values.map(_csv_text).astype(TEXT)
    if dtype in (FLAG, "bool"):
        flags = values.map(lambda v: {"True": True, "False": False}.get(_csv_text(v)))
        return flags.fillna(False).astype(bool) if dtype == "bool" else flags.astype(FLAG)
    if dtype == TIME:
        times = values.map(lambda v: None if _csv_text(v) is None else v)
        return pd.to_datetime(times, utc=True, format="ISO8601").astype(TIME)
    numbers = pd.to_numeric(values.map(_csv_text), errors="coerce").astype(NUMBER)
    return numbers.round().astype(COUNT) if dtype == COUNT else numbers


def _inferred_dtype(values: pd.Series) -> str:
    texts = [text for text in map(_csv_text, values) if text is not None]
    if not texts:
        return NUMBER
    if all(text in ("True", "False") for text in texts):
        return FLAG
    if all(text.lstrip("+-").isdigit() for text in texts):
        return COUNT
    return NUMBER if all(_is_number(text) for text in texts) else TEXT


def _csv_text(value: Any) -> str | None:
    """A value as ``to_csv`` writes it; ``None`` for missing (None, NaN, NA, NaT, "")."""
    if value is None or value is pd.NA or value is pd.NaT or value == "":
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return str(value)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _trial_times(trial_dir: Path | None, last: Mapping[str, Any]) -> dict[str, Any]:
    """``started_at`` / ``ended_at`` from the times Ray stamps on every report line (UTC,
    whole seconds): the first report's time less the trial's run time then, the last's time."""
    first = _first_result(trial_dir) if trial_dir is not None else {}
    started = as_number(first.get("timestamp")) - as_number(first.get("time_total_s"))
    return {"started_at": _utc(started), "ended_at": _utc(as_number(last.get("timestamp")))}


def _first_result(trial_dir: Path) -> dict[str, Any]:
    file = trial_dir / RESULT_FILE
    if not file.is_file():
        return {}
    with file.open() as handle:
        line = handle.readline()
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return {}
    return row if isinstance(row, dict) else {}


def _utc(seconds: float) -> pd.Timestamp | None:
    return pd.Timestamp(round(seconds), unit="s", tz="UTC") if math.isfinite(seconds) else None
