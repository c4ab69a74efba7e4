"""The experiment folder, both ends, Ray-free: its file names, its metadata, the trials table's
schema and CSV round trip, reading a whole folder, reconciled; and one driver at a time
(:mod:`tuner.experiment.lock`, imported by the search only).

Reading a folder's tables needs pandas, which its names load on first use: the file names, the
metadata and the lock answer a usage error without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tuner.experiment._files import (
    CLAIMS_FILE,
    CUT_FILE,
    CUT_STARTED_UNIX_S,
    CUT_UNIX_S,
    DEFAULT_REPORTS_DIR,
    DEFAULT_STORAGE,
    EFFECTS_FILE,
    METADATA_FILE,
    PHASES_FILE,
    PROBE_CACHE_FILE,
    RAY_LOG_FILE,
    REMEASURE_FILE,
    REPORT_FILE,
    REPORT_HTML_FILE,
    RETRIES_FILE,
    RUN_TRACEBACK_FILE,
    SEEDS_FILE,
    STUDY_FILE,
    STUDY_TIME_TO_TARGET_ATTR,
    STUDY_TRIAL_ID_ATTR,
    TUNER_FILES,
)
from tuner.experiment._metadata import memory_limit, read_metadata, update_metadata, write_metadata
from tuner.experiment._read import read_phases, study_distributions

if TYPE_CHECKING:
    from tuner.experiment._load import (
        Experiment,
        load_experiment,
        resolve_experiment,
        speed_settings_of,
    )
    from tuner.experiment._schema import (
        LEADING_COLUMNS,
        PARAM_PREFIX,
        column_meanings,
        read_trials_csv,
        trial_dtypes,
        typed_trials,
        write_trials_csv,
    )

# The names whose modules import pandas, by module (PEP 562: loaded on first use).
_LAZY = {
    "_load": ("Experiment", "load_experiment", "resolve_experiment", "speed_settings_of"),
    "_schema": (
        "LEADING_COLUMNS",
        "PARAM_PREFIX",
        "column_meanings",
        "read_trials_csv",
        "trial_dtypes",
        "typed_trials",
        "write_trials_csv",
    ),
}
_LAZY_NAMES = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _LAZY_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "CLAIMS_FILE",
    "CUT_FILE",
    "CUT_STARTED_UNIX_S",
    "CUT_UNIX_S",
    "DEFAULT_REPORTS_DIR",
    "DEFAULT_STORAGE",
    "EFFECTS_FILE",
    "LEADING_COLUMNS",
    "METADATA_FILE",
    "PARAM_PREFIX",
    "PHASES_FILE",
    "PROBE_CACHE_FILE",
    "RAY_LOG_FILE",
    "REMEASURE_FILE",
    "REPORT_FILE",
    "REPORT_HTML_FILE",
    "RETRIES_FILE",
    "RUN_TRACEBACK_FILE",
    "SEEDS_FILE",
    "STUDY_FILE",
    "STUDY_TIME_TO_TARGET_ATTR",
    "STUDY_TRIAL_ID_ATTR",
    "TUNER_FILES",
    "Experiment",
    "column_meanings",
    "load_experiment",
    "memory_limit",
    "read_metadata",
    "read_phases",
    "read_trials_csv",
    "resolve_experiment",
    "speed_settings_of",
    "study_distributions",
    "trial_dtypes",
    "typed_trials",
    "update_metadata",
    "write_metadata",
    "write_trials_csv",
]
