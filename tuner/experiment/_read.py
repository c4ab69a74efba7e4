"""Reading the files of an experiment folder, one function per file, never a pickle.

What cannot be read is appended to ``problems`` (one line each) instead of raising: a report
of a damaged folder says what it could not read.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.errors import error_line
from tuner.experiment._files import (
    ERROR_FILE,
    PARAMS_FILE,
    PHASES_FILE,
    RAY_STATE_GLOB,
    RESULT_FILE,
    STUDY_FILE,
    TABLE_COLUMNS,
)
from tuner.record import COUNT, CURVE_KEYS, NUMBER, TRIAL_ID, VAL_ACCURACY, declared_dtype
from tuner.units import as_number

if TYPE_CHECKING:  # pandas loads on first use: the lock and a usage error need none of it
    import pandas as pd


def load_study(study_db: Path, study_name: str) -> Any:
    """The stored Optuna study, loaded from a temporary copy (the experiment is never written);
    None when there is no readable study (no file, or another study name)."""
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


def study_distributions(study: Any) -> dict[str, Any]:
    """Every parameter's distribution over the study's trials (``{}`` without a study)."""
    found: dict[str, Any] = {}
    for trial in study.get_trials(deepcopy=False) if study is not None else ():
        found.update(trial.distributions)
    return found


def read_phases(folder: Path) -> list[dict[str, Any]]:
    """A trial folder's phase log (tuner.tune.phases), one dict per line ([]: none, damaged)."""
    try:
        return [json.loads(line) for line in (folder / PHASES_FILE).read_text().splitlines()]
    except (OSError, ValueError):
        return []


def json_object(file: Path) -> dict[str, Any]:
    """The JSON object a file holds; {} when it is absent, damaged or being written."""
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_table(file: Path, problems: list[str]) -> pd.DataFrame | None:
    """A CSV the search wrote, or None when absent, empty or damaged (unparsable, lacking a
    column of :data:`TABLE_COLUMNS`, text in a numeric column): listed in ``problems``, read as
    absent (a table half read would be half the measurements, told as all)."""
    if not file.is_file() or file.stat().st_size == 0:
        return None
    import pandas as pd

    try:
        frame = pd.read_csv(file)
    except (OSError, ValueError) as exc:  # pandas' parse errors and a decode error: ValueErrors
        problems.append(f"{file.name} could not be read ({error_line(exc)}); {_WITHOUT}")
        return None
    damage = _table_damage(frame, TABLE_COLUMNS.get(file.name, ()))
    if damage:
        problems.append(f"{file.name} {damage}; {_WITHOUT}")
        return None
    if len(frame) and not _ends_whole(file):  # a writer stopped mid-row: its values are cut
        problems.append(f"{file.name}: its last line is cut short; that row is left out.")
        frame = frame.iloc[:-1]
    if TRIAL_ID in frame:
        frame[TRIAL_ID] = frame[TRIAL_ID].astype(str)
    return frame


def _ends_whole(file: Path) -> bool:
    with file.open("rb") as handle:
        handle.seek(-1, 2)
        return handle.read(1) == b"\n"


_WITHOUT = "the report goes without it (restore the file, or re-run the search)."


def _table_damage(frame: pd.DataFrame, columns: Sequence[str]) -> str | None:
    """What makes a table unreadable to its readers, or ``None``."""
    import pandas as pd

    missing = [column for column in columns if column not in frame]
    if missing:
        return f"lacks the column(s) {', '.join(missing)}"
    for column in frame.columns:
        if declared_dtype(str(column)) in (NUMBER, COUNT):
            given = frame[column].dropna()
            other = given[pd.to_numeric(given, errors="coerce").isna()]
            if len(other):
                return f"holds {other.iloc[0]!r} in its column {column}, not a number"
    return None


def ray_states(path: Path, problems: list[str]) -> dict[str, dict[str, Any]]:
    """trial_id -> {status, relative_logdir} from Ray's latest experiment state: the greatest
    file name, as Ray orders them on resume (a resume writes old and new within a millisecond);
    one being written is listed and the one before read. Its pickled fields are never read."""
    data: Any = {}
    for file in sorted(path.glob(RAY_STATE_GLOB), reverse=True):
        try:
            data = json.loads(file.read_text())
            break
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            problems.append(f"{file.name} could not be read ({reason(exc)}); an older one is used.")
    states: dict[str, dict[str, Any]] = {}
    for entry in data.get("trial_data", []) if isinstance(data, dict) else []:
        try:
            state = json.loads(entry[0])
        except (json.JSONDecodeError, IndexError, TypeError):
            continue
        states[str(state.get(TRIAL_ID))] = {
            "status": str(state.get("status", "")),
            "relative_logdir": state.get("relative_logdir") or "",
        }
    return states


@dataclass(frozen=True)
class Results:
    """A trial's result.json, read line by line."""

    last: dict[str, Any]  # the last valid line ({} when none)
    first: dict[str, Any]  # the first valid line ({} when none)
    reports: int  # valid lines
    lost_tail: bool  # a damaged line came after the last valid one: the latest report is lost
    # The evaluation reports' points of the accuracy curve (record.CURVE_KEYS but the trial id),
    # in the order written: a retried trial's repeated steps and the final report, which repeats
    # the last evaluation, are in it (the reader keeps each step's last).
    curve: list[dict[str, Any]] = field(default_factory=list)


NO_RESULTS = Results({}, {}, 0, lost_tail=False)  # no result.json (a trial that never started)


def read_results(trial_dir: Path, problems: list[str]) -> Results:
    """The valid JSON lines of result.json; each damaged line is skipped and listed."""
    file = trial_dir / RESULT_FILE
    if not file.exists():
        return NO_RESULTS
    try:
        text = file.read_text(errors="replace")
    except OSError as exc:  # unreadable (permissions, I/O): as if every line were damaged
        problems.append(f"{trial_dir.name}/{RESULT_FILE} cannot be read ({exc.strerror}).")
        return Results({}, {}, 0, lost_tail=True)
    rows: list[dict[str, Any]] = []
    lost_tail = False
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)  # Python's json reads NaN, as Ray writes it
            why = "" if isinstance(row, dict) else "not a JSON object"
        except json.JSONDecodeError as exc:
            why = reason(exc)
        if why:
            problems.append(
                f"{trial_dir.name}/{RESULT_FILE} line {number} is damaged ({why}); skipped."
            )
        else:
            rows.append(row)
        lost_tail = bool(why)
    # An empty file (truncated, a full disk) lost whatever it held: the study may still have it.
    first, last = (rows[0], rows[-1]) if rows else ({}, {})
    return Results(last, first, len(rows), lost_tail or not rows, _curve(rows))


def _curve(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The points of the reports that carry an evaluation (a feasibility or setup report has
    no accuracy)."""
    keys = [key for key in CURVE_KEYS if key != TRIAL_ID]
    return [
        {key: row.get(key) for key in keys}
        for row in rows
        if math.isfinite(as_number(row.get(VAL_ACCURACY)))
    ]


def read_params(trial_dir: Path, problems: list[str]) -> dict[str, Any]:
    file = trial_dir / PARAMS_FILE
    try:
        config = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        problems.append(f"{trial_dir.name}/{PARAMS_FILE} is damaged ({reason(exc)}).")
        return {}
    if not isinstance(config, dict):  # read as none, said: its config is not known
        problems.append(f"{trial_dir.name}/{PARAMS_FILE} is damaged (not a JSON object).")
        return {}
    return config


def error_text(trial_dir: Path | None) -> str:
    """The last line of a crashed trial's error.txt (error.pkl is never unpickled)."""
    if trial_dir is None or not (trial_dir / ERROR_FILE).is_file():
        return ""
    lines = (trial_dir / ERROR_FILE).read_text(errors="replace").splitlines()
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


def reason(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}"
    return type(exc).__name__
