"""An experiment folder -> :class:`Experiment`: one row per trial (its last valid report, its
kind, Ray's view of it), from files only. Nothing is guessed silently: what could not be read is
listed in :attr:`Experiment.problems`. A trial whose last report is final has ended, whatever
Ray's (possibly stale) state says; a damaged final report is taken from the Optuna study, and a
disagreement between the two is listed.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from tuner import record
from tuner.errors import TunerError
from tuner.experiment import _read
from tuner.experiment._files import (
    CUT_FILE,
    CUT_STARTED_UNIX_S,
    CUT_UNIX_S,
    DEFAULT_STORAGE,
    EFFECTS_FILE,
    METADATA_FILE,
    PARAMS_FILE,
    PROBE_CACHE_FILE,
    RAY_HOSTNAME,
    RAY_KEYS,
    RAY_NODE_IP,
    RAY_STATE_GLOB,
    RAY_TIME_TOTAL_S,
    RAY_TIMESTAMP,
    REMEASURE_FILE,
    RESULT_FILE,
    SEEDS_FILE,
    STUDY_FILE,
    STUDY_TRIAL_ID_ATTR,
)
from tuner.experiment._metadata import read_metadata
from tuner.experiment._schema import LEADING_COLUMNS, PARAM_PREFIX, typed_trials
from tuner.experiment.limits import down_time_s
from tuner.units import as_number

_ENDED_BY_RAY = ("TERMINATED", "ERROR")
# Compared between a trial's final result.json line and what the study was told.
_RECONCILED = (record.STATUS, "images_per_second", "val_accuracy")


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
    seeds: pd.DataFrame | None = None  # seeds.csv: each seed run's evaluations (its curve)
    probe_cache: dict[str, Any] = field(default_factory=dict)  # speed key -> SpeedChoice dict
    study: Any = None  # the Optuna study (an in-memory copy), or None when unreadable
    problems: list[str] = field(default_factory=list)  # what could not be read, one line each
    # Every trial's accuracy curve: one row per evaluation report (record.CURVE_KEYS), by step,
    # training images (every worker's) and training seconds (evaluations and probes excluded).
    curves: pd.DataFrame = field(default_factory=lambda: curves_frame([]))

    def problem_lines(self, shown: int = 10) -> list[str]:
        """The short list of what could not be read, for a console ([] when all was read)."""
        if not self.problems:
            return []
        lines = [f"warning: could not read everything in {self.path}:"]
        lines += [f"  {problem}" for problem in self.problems[:shown]]
        if len(self.problems) > shown:
            lines.append(f"  ... and {len(self.problems) - shown} more (the report's Details)")
        return lines

    def with_seeds(self) -> Experiment:
        """After its picks were retrained with seeds: ``seeds.csv`` read, the rest kept (the
        search hands on what it read: STYLE 14)."""
        return self._reread(seeds=SEEDS_FILE)

    def with_effects(self, metadata: dict[str, Any]) -> Experiment:
        """After its technique effects were measured and its metadata rewritten."""
        reread = self._reread(effects=EFFECTS_FILE, seeds=SEEDS_FILE)
        return dataclasses.replace(reread, metadata=metadata)

    def _reread(self, **tables: str) -> Experiment:
        problems = list(self.problems)
        read = {name: _read.read_table(self.path / file, problems) for name, file in tables.items()}
        return dataclasses.replace(self, **read, problems=[*dict.fromkeys(problems)])


def resolve_experiment(name_or_path: str | Path, storage: str | Path = DEFAULT_STORAGE) -> Path:
    """The experiment folder for a path, or for a name under ``storage``."""
    candidates = [Path(name_or_path), Path(storage) / str(name_or_path)]
    for path in candidates:
        if path.is_dir():
            if not _looks_like_experiment(path):
                raise TunerError(
                    f"{path} is not an experiment folder (no {METADATA_FILE}, {STUDY_FILE} or "
                    "trial folders); give the folder that `tuner search --name` created."
                )
            return path.resolve()
        if path.is_file():
            raise TunerError(
                f"{path} is a file, not an experiment folder; give the folder that "
                "`tuner search --name` created (or its name under --storage)."
            )
    tried = list(dict.fromkeys(str(path) for path in candidates))
    missing = (
        f"{tried[0]} does not exist" if len(tried) == 1 else f"neither {' nor '.join(tried)} exists"
    )
    raise TunerError(
        f"No experiment {str(name_or_path)!r}: {missing}; "
        "give its path or its name under --storage."
    )


def load_experiment(experiment_dir: str | Path) -> Experiment:
    """Read an experiment folder, finished, interrupted or still running."""
    path = resolve_experiment(experiment_dir)
    metadata = read_metadata(path)
    name = str(metadata.get("name") or path.name)
    problems: list[str] = []
    study = _read.load_study(path / STUDY_FILE, name)
    if study is None and (path / STUDY_FILE).is_file():
        problems.append(
            f"{STUDY_FILE} could not be read (damaged, or no study {name!r}): the report goes "
            "without it (no reconciliation with result.json, no parameter importance)."
        )
    configs, rows, given, points = _read_trials(path, _study_finals(study), problems, metadata)
    searched = list(_read.study_distributions(study))
    params = _param_names(configs, metadata, searched, given)
    return Experiment(
        name=name,
        path=path,
        metadata=metadata,
        trials=_trials_frame(rows, configs, params),
        configs=configs,
        param_names=params,
        searched_names=searched,
        remeasure=_read.read_table(path / REMEASURE_FILE, problems),
        effects=_read.read_table(path / EFFECTS_FILE, problems),
        seeds=_read.read_table(path / SEEDS_FILE, problems),
        probe_cache=_read.json_object(path / PROBE_CACHE_FILE),  # none: speed probes off
        study=study,
        problems=problems,
        curves=curves_frame(points),
    )


def curves_frame(points: list[dict[str, Any]]) -> pd.DataFrame:
    """The accuracy curves: one row per (trial, step), the last report of a step kept (a
    retried trial reports its steps again; the final report repeats the last evaluation)."""
    frame = pd.DataFrame(points, columns=list(record.CURVE_KEYS))
    frame = frame.drop_duplicates([record.TRIAL_ID, record.STEP], keep="last")
    dtypes = {name: record.declared_dtype(name) for name in record.CURVE_KEYS}
    return frame.astype(dtypes).reset_index(drop=True)


def speed_settings_of(value: Any) -> dict[str, Any]:
    """A trial's ``speed_settings`` (JSON text in its reports and in trials.csv) as a dict;
    empty when missing or damaged."""
    try:
        settings = json.loads(value) if isinstance(value, str) and value else {}
    except json.JSONDecodeError:
        return {}
    return settings if isinstance(settings, dict) else {}


def _looks_like_experiment(path: Path) -> bool:
    if (path / METADATA_FILE).is_file() or (path / STUDY_FILE).is_file():
        return True
    return any(path.glob(f"*/{PARAMS_FILE}")) or any(path.glob(RAY_STATE_GLOB))


# ---- the trials --------------------------------------------------------------------------------


def _read_trials(
    path: Path,
    finals: Mapping[str, Mapping[str, Any]],
    problems: list[str],
    metadata: Mapping[str, Any],
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]], set[str], list[dict[str, Any]]]:
    """Each trial's run config and row, the names in any ``params.json``, and its curve."""
    states = _read.ray_states(path, problems)
    by_dir = {s["relative_logdir"]: tid for tid, s in states.items()}
    configs: dict[str, dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    given: set[str] = set()
    points: list[dict[str, Any]] = []
    for trial_dir in sorted((p.parent for p in path.glob(f"*/{PARAMS_FILE}")), key=_trial_order):
        results = _read.read_results(trial_dir, problems)
        name = trial_dir.name
        trial_id = str(
            results.last.get(record.TRIAL_ID) or by_dir.get(name) or _id_from_dirname(name)
        )
        result, lost = _reconcile(trial_id, results, finals.get(trial_id), problems)
        params = _read.read_params(trial_dir, problems)
        configs[trial_id] = {**params, **speed_settings_of(result.get(record.SPEED_SETTINGS))}
        given |= set(params)
        state = states.pop(trial_id, {})
        row = _trial_row(trial_id, trial_dir, result, results, state, lost=lost)
        rows.append(_without_down_time(row, metadata))
        points += [{record.TRIAL_ID: trial_id, **point} for point in results.curve]
    for trial_id, state in states.items():  # known to Ray, but no folder yet
        rows.append(_trial_row(trial_id, None, {}, _read.NO_RESULTS, state, lost=False))
    return configs, rows, given, points


def _study_finals(study: Any) -> dict[str, dict[str, Any]]:
    """Ray trial id -> the user attributes of its finished Optuna trial (what it was told)."""
    trials = study.get_trials(deepcopy=False) if study is not None else ()
    return {
        str(trial.user_attrs[STUDY_TRIAL_ID_ATTR]): dict(trial.user_attrs)
        for trial in trials
        if trial.state.is_finished()
        and {STUDY_TRIAL_ID_ATTR, record.STATUS} <= trial.user_attrs.keys()
    }


def _reconcile(
    trial_id: str, results: _read.Results, told: Mapping[str, Any] | None, problems: list[str]
) -> tuple[dict[str, Any], bool]:
    """The trial's result: its last valid line, or the study's when its final line is damaged
    (a disagreement is listed); True: its last report is lost (whether it ended is unknown)."""
    result = dict(results.last)
    final_lost = results.lost_tail and not result.get(record.FINAL)
    if final_lost and told and told.get(record.FINAL):
        measured = {k: v for k, v in told.items() if k != STUDY_TRIAL_ID_ATTR}
        result.update({k: math.nan if v is None else v for k, v in measured.items()})
        lost = f"{RESULT_FILE} is empty or unreadable"
        what = "final report is damaged" if results.reports else lost
        problems.append(
            f"trial {trial_id}: its {what}; its final status and "
            f"measurements are taken from {STUDY_FILE}."
        )
    elif final_lost and results.reports:  # nothing else holds its final values
        result[record.INFEASIBLE_REASON] = f"its last report in {RESULT_FILE} is damaged"
        return result, True
    elif told and result:
        _compare(trial_id, result, told, problems)
    return result, False


def _compare(
    trial_id: str, result: dict[str, Any], told: Mapping[str, Any], problems: list[str]
) -> None:
    """List each disagreement with the study; the study's number replaces a non-number."""
    for key in _RECONCILED:
        if key not in told or _same(result.get(key), told[key]):
            continue
        if _not_a_number(key, result.get(key)) and not _not_a_number(key, told[key]):
            problems.append(
                f"trial {trial_id}: {RESULT_FILE} holds {result.get(key)!r} for {key}, not a "
                f"number; the report uses {STUDY_FILE}'s {told[key]!r}."
            )
            result[key] = told[key]
            continue
        problems.append(
            f"trial {trial_id}: {RESULT_FILE} and {STUDY_FILE} disagree on {key} "
            f"({result.get(key)!r} vs {told[key]!r}); the report uses {RESULT_FILE}."
        )


def _not_a_number(key: str, value: Any) -> bool:
    """A value present where the record declares a number, that is none."""
    numeric = record.declared_dtype(key) in (record.NUMBER, record.COUNT)
    real = isinstance(value, int | float) and not isinstance(value, bool)
    return numeric and value is not None and not real


def _same(a: Any, b: Any) -> bool:
    """Equal; numbers within rounding; missing (None, NaN) only equal to missing."""
    if isinstance(a, str | bool) or isinstance(b, str | bool):
        return a == b
    x, y = as_number(a), as_number(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return math.isclose(x, y, rel_tol=1e-9)


def _trial_row(
    trial_id: str,
    trial_dir: Path | None,
    result: Mapping[str, Any],
    results: _read.Results,
    state: Mapping[str, Any],
    *,
    lost: bool,
) -> dict[str, Any]:
    """``lost``: the reconciled last report ``result`` is damaged (ended: unknown)."""
    ray_status = str(state.get("status", ""))
    report = {k: v for k, v in result.items() if k not in RAY_KEYS and _is_scalar(v)}
    ended = not lost and (report.get(record.FINAL) is True or ray_status in _ENDED_BY_RAY)
    if trial_dir is not None and (trial_dir / CUT_FILE).is_file():
        ended = report.get(record.FINAL) is True  # Ray's TERMINATED: the search's end cut it
    kind = record.classify(report, ended=ended, crashed=ray_status == "ERROR")
    status = report.get(record.STATUS) or None
    error = str(report.get(record.ERROR) or "")
    if kind == "errored":
        status, error = "error", error or _read.error_text(trial_dir)
    feasible = report.get(record.FEASIBLE) is True and kind != "errored"
    reason = str(report.get(record.INFEASIBLE_REASON) or ("" if feasible else error))
    node = report.get(record.NODE) or result.get(RAY_HOSTNAME) or result.get(RAY_NODE_IP) or ""
    started, ended = _wall_clock(report, results.first, result)
    if not math.isfinite(ended - started):  # cut before its first report: when it ran
        started, ended = _cut_clock(trial_dir)
    return {
        **report,
        record.TRIAL_ID: trial_id,
        record.KIND: kind,
        record.STATUS: status,
        record.FEASIBLE: feasible,
        record.INFEASIBLE_REASON: reason,
        record.NODE: str(node),
        record.TRIAL_TIME_S: ended - started,
        record.ERROR: error,
        record.RAY_STATUS: ray_status,
        record.REPORTS: results.reports,
        record.TRIAL_DIR: trial_dir.name if trial_dir else "",
        record.STARTED_AT: _utc(started),
        record.ENDED_AT: _utc(ended),
    }


def _without_down_time(row: dict[str, Any], metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The trial's wall time less the time no run of the search was on (its driver stopped,
    then resumed): the trial did not run then."""
    started, ended = _wall_clock(row, {}, {})
    if math.isfinite(started) and math.isfinite(ended):
        row[record.TRIAL_TIME_S] -= down_time_s(metadata, started, ended)
    return row


def _wall_clock(
    report: dict[str, Any], first: dict[str, Any], last: dict[str, Any]
) -> tuple[float, float]:
    """When the trial began and last reported (Unix seconds; NaN when unknown): the trainable's
    own stamps, else Ray's (an older folder; whole seconds, part of the trial's time)."""
    started = as_number(report.get(record.TRIAL_STARTED_UNIX_S))
    ended = as_number(report.get(record.REPORTED_UNIX_S))
    if math.isfinite(started) and math.isfinite(ended):
        return started, ended
    began = as_number(first.get(RAY_TIMESTAMP)) - as_number(first.get(RAY_TIME_TOTAL_S))
    return began, as_number(last.get(RAY_TIMESTAMP))


def _cut_clock(trial_dir: Path | None) -> tuple[float, float]:
    """When a trial the search's end cut started and was cut (:data:`CUT_FILE`; NaN: not cut,
    or cut by a search from before the stamps)."""
    stamps = _read.json_object(trial_dir / CUT_FILE) if trial_dir else {}
    return as_number(stamps.get(CUT_STARTED_UNIX_S)), as_number(stamps.get(CUT_UNIX_S))


def _utc(seconds: float) -> pd.Timestamp | None:
    return pd.Timestamp(round(seconds), unit="s", tz="UTC") if math.isfinite(seconds) else None


def _trial_order(trial_dir: Path) -> tuple[int, str]:
    parts = trial_dir.name.split("_")
    number = next((int(p) for p in parts[2:3] if p.isdigit()), 0)
    return number, trial_dir.name


def _id_from_dirname(dirname: str) -> str:
    parts = dirname.split("_")
    return parts[1] if len(parts) > 1 else dirname


# ---- the parameters and the frame --------------------------------------------------------------


def _param_names(
    configs: Mapping[str, Mapping[str, Any]],
    metadata: Mapping[str, Any],
    searched: list[str],
    given: set[str],
) -> list[str]:
    """Searched names plus the settings the space derived from them (e.g. lr from base_lr).
    Speed knobs the probes chose are not parameters: ``speed_settings`` holds them."""
    workload = metadata.get("workload")
    names = dict.fromkeys(searched)
    keys = dict.fromkeys(k for config in configs.values() for k in config)
    for key in keys:
        values = {json.dumps(c.get(key), sort_keys=True, default=str) for c in configs.values()}
        fixed = len(values) <= 1 or (isinstance(workload, Mapping) and key in workload)
        if not fixed and key in given:
            names[key] = None
    return list(names)


def _trials_frame(
    rows: list[dict[str, Any]], configs: Mapping[str, Mapping[str, Any]], params: list[str]
) -> pd.DataFrame:
    for row in rows:
        config = configs.get(row[record.TRIAL_ID], {})
        for name in params:
            value = config.get(name)
            row[PARAM_PREFIX + name] = value if _is_scalar(value) else json.dumps(value)
    frame = pd.DataFrame(rows)
    param_cols = [PARAM_PREFIX + n for n in params]
    rest = sorted(c for c in frame if c not in LEADING_COLUMNS and c not in param_cols)
    return typed_trials(frame.reindex(columns=[*LEADING_COLUMNS, *rest, *param_cols]))


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)
