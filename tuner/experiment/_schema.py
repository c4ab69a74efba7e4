"""The trials table's schema and its CSV round trip. A column's dtype is :mod:`tuner.record`'s
(``param_<name>``: the ``TrainConfig`` field's); one neither declares is inferred from its
values as CSV writes them, so a round trip infers the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from tuner import record
from tuner.record import COUNT, FLAG, NUMBER, TEXT, TIME

PARAM_PREFIX = "param_"
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # ISO 8601, UTC, as trials.csv writes it

# The columns a reader looks at first, in this order; then every other reported key (sorted),
# then param_<name> per searched or derived setting.
LEADING_COLUMNS: tuple[str, ...] = (
    record.TRIAL_ID,
    record.KIND,
    record.STATUS,
    record.FEASIBLE,
    record.INFEASIBLE_REASON,
    "images_per_second",
    "data_wait_fraction",
    "loader_images_per_second",
    "bound",
    "val_accuracy",
    "val_loss",
    "peak_memory_bytes",
    "memory_kind",
    record.NODE,
    record.TRIAL_TIME_S,
    record.STARTED_AT,
    record.ENDED_AT,
    record.ERROR,
    record.RAY_STATUS,
    record.REPORTS,
    record.TRIAL_DIR,
    "notes",
)


def column_meanings() -> dict[str, str]:
    """The leading columns and the column families, each with what it means (for the report)."""
    keys = {**record.ENGINE_KEYS, **record.SEARCH_KEYS, **record.TABLE_KEYS}
    meanings = {name: keys[name].meaning for name in LEADING_COLUMNS}
    meanings[f"{record.EFFECTIVE_PREFIX}<field>"] = (
        "what actually ran for each technique (a fallback shows here)"
    )
    meanings[f"{PARAM_PREFIX}<name>"] = "each searched or derived setting of the trial"
    return meanings


def trial_dtypes(columns: Iterable[str]) -> dict[str, str | None]:
    """The dtype of each column, or ``None``: inferred from its values."""
    return {column: _declared(column) for column in columns}


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
    (``pandas.read_parquet``) and as :func:`tuner.experiment.load_experiment` made it."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    return typed_trials(frame)


def _declared(column: str) -> str | None:
    if column.startswith(PARAM_PREFIX):
        return record.config_dtype(column.removeprefix(PARAM_PREFIX))
    return record.declared_dtype(column)


def _typed(values: pd.Series, dtype: str) -> pd.Series:
    if dtype == TEXT:
        return values.map(_csv_text).astype(TEXT)
    if dtype == FLAG:
        return values.map(lambda v: {"True": True, "False": False}.get(_csv_text(v))).astype(FLAG)
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
    return None if pd.isna(value) or value == "" else str(value)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
