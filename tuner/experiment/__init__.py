"""The experiment folder, both ends: file names, metadata, the trials table, reading a folder.

Ray-free (the search writes through it; ``tuner report`` reads a folder someone sent you):

- :mod:`~tuner.experiment._files`: every file name of the folder, and Ray's bookkeeping keys;
- :mod:`~tuner.experiment._metadata`: ``tuner_experiment.json``, its one writer and one reader;
- :mod:`~tuner.experiment._schema`: the trials table's dtypes (from :mod:`tuner.record`) and its
  CSV round trip;
- :mod:`~tuner.experiment._read`: each file of a folder, read (never a pickle);
- :mod:`~tuner.experiment._load`: a folder -> :class:`Experiment`, trials reconciled.
"""

from __future__ import annotations

from tuner.experiment._files import (
    EFFECTS_FILE,
    METADATA_FILE,
    PROBE_CACHE_FILE,
    REMEASURE_FILE,
    STUDY_FILE,
    STUDY_TRIAL_ID_ATTR,
    TUNER_FILES,
)
from tuner.experiment._load import (
    Experiment,
    load_experiment,
    resolve_experiment,
    speed_settings_of,
)
from tuner.experiment._metadata import memory_limit, read_metadata, update_metadata, write_metadata
from tuner.experiment._read import load_study
from tuner.experiment._schema import (
    LEADING_COLUMNS,
    PARAM_PREFIX,
    column_meanings,
    read_trials_csv,
    trial_dtypes,
    typed_trials,
    write_trials_csv,
)

__all__ = [
    "EFFECTS_FILE",
    "LEADING_COLUMNS",
    "METADATA_FILE",
    "PARAM_PREFIX",
    "PROBE_CACHE_FILE",
    "REMEASURE_FILE",
    "STUDY_FILE",
    "STUDY_TRIAL_ID_ATTR",
    "TUNER_FILES",
    "Experiment",
    "column_meanings",
    "load_experiment",
    "load_study",
    "memory_limit",
    "read_metadata",
    "read_trials_csv",
    "resolve_experiment",
    "speed_settings_of",
    "trial_dtypes",
    "typed_trials",
    "update_metadata",
    "write_metadata",
    "write_trials_csv",
]
