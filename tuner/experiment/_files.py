"""The experiment folder's contract: every file name in it, declared once.

``tuner search`` (the writer) and ``tuner report`` (the reader) both import these names through
:mod:`tuner.experiment`; neither spells a file name itself.

``<storage>/<name>/`` holds:

- Ray Tune's experiment: ``experiment_state-*.json`` and one folder per trial (named by
  :func:`tuner.search.tracking.trial_dirname`) with ``params.json`` (the trial's config),
  ``result.json`` (JSON lines, one per ``tune.report``), TensorBoard's ``events.out.tfevents.*``
  and, for a crashed trial, ``error.txt`` (``error.pkl`` beside it is never read);
- :data:`STUDY_FILE`: the Optuna study (SQLite), study name = the experiment name; each of its
  trials names its Ray trial in the user attribute :data:`STUDY_TRIAL_ID_ATTR`;
- :data:`METADATA_FILE`: what was run (space, workload, objectives, budgets, hardware, state);
- :data:`REMEASURE_FILE`: the top candidates re-measured after the search, one row per repeat;
- :data:`EFFECTS_FILE`: the controlled technique effects around the recommended config;
- :data:`PROBE_CACHE_FILE`: the speed settings probed per training config (reused by trials);
- :data:`LOCK_FILE`: who drives the experiment now (:mod:`tuner.experiment.lock`; never uploaded).
"""

from __future__ import annotations

from tuner.record import TRIAL_ID

__all__ = [
    "EFFECTS_FILE",
    "ERROR_FILE",
    "LOCK_FILE",
    "METADATA_FILE",
    "PARAMS_FILE",
    "PROBE_CACHE_FILE",
    "RAY_KEYS",
    "RAY_STATE_GLOB",
    "REMEASURE_FILE",
    "RESULT_FILE",
    "STUDY_FILE",
    "STUDY_TRIAL_ID_ATTR",
    "TUNER_FILES",
]

METADATA_FILE = "tuner_experiment.json"
STUDY_FILE = "study.db"
STUDY_TRIAL_ID_ATTR = "ray_trial_id"  # the Optuna trial's user attribute naming its Ray trial
REMEASURE_FILE = "remeasure.csv"
EFFECTS_FILE = "effects.csv"
PROBE_CACHE_FILE = "probe_cache.json"
LOCK_FILE = "driver.lock"

# Ray Tune's own files (names Ray chooses; listed so the reader does not restate them).
RAY_STATE_GLOB = "experiment_state-*.json"
PARAMS_FILE = "params.json"
RESULT_FILE = "result.json"
ERROR_FILE = "error.txt"

# The files tuner itself writes next to Ray's (copied beside Ray's folder on URI storage).
TUNER_FILES = (METADATA_FILE, STUDY_FILE, REMEASURE_FILE, EFFECTS_FILE, PROBE_CACHE_FILE)

# Ray Tune's bookkeeping keys in every result.json line, beside the trial's own report (Ray's
# ray.tune.result constants; restated here because this package reads a folder without Ray).
RAY_TIMESTAMP = "timestamp"
RAY_TIME_TOTAL_S = "time_total_s"
RAY_HOSTNAME = "hostname"
RAY_NODE_IP = "node_ip"
RAY_KEYS = frozenset().union(
    (TRIAL_ID, RAY_TIMESTAMP, RAY_TIME_TOTAL_S, RAY_HOSTNAME, RAY_NODE_IP),
    ("checkpoint_dir_name", "done", "training_iteration", "date", "time_this_iter_s", "pid"),
    ("config", "time_since_restore", "iterations_since_restore", "experiment_tag"),
    ("should_checkpoint",),
)
