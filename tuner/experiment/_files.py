"""Every file name of the experiment folder, declared once: the search (the writer) and the
report (the reader) both import them (what each file holds: docs/architecture.md,
"Experiment folder")."""

from __future__ import annotations

from tuner.record import FINAL, STATUS, TRIAL_ID, VAL_ACCURACY

# Where experiments and reports go by default (--storage, --reports-dir; URI storage's local copy).
DEFAULT_STORAGE = "experiments"
DEFAULT_REPORTS_DIR = "reports"
# A report's folder: the report (Markdown and HTML) and every claim it makes, as records.
REPORT_FILE = "report.md"
REPORT_HTML_FILE = "report.html"
CLAIMS_FILE = "claims.json"

METADATA_FILE = "tuner_experiment.json"
STUDY_FILE = "study.db"  # the Optuna study (SQLite), named after the experiment
STUDY_TIME_TO_TARGET_ATTR = "time_to_target"  # the study's user attribute: every trial's time
STUDY_TRIAL_ID_ATTR = "ray_trial_id"  # the Optuna trial's user attribute naming its Ray trial
REMEASURE_FILE = "remeasure.csv"
EFFECTS_FILE = "effects.csv"
SEEDS_FILE = "seeds.csv"  # the picks retrained with seeds, each run's curve (tuner.compare.seeds)
PROBE_CACHE_FILE = "probe_cache.json"
# The columns the readers of each table need (its writer writes more): a table lacking one is
# damaged, read as absent and said so (tuner.experiment._read.read_table).
TABLE_COLUMNS = {
    REMEASURE_FILE: (TRIAL_ID, "repeat", STATUS, "images_per_second"),
    EFFECTS_FILE: ("arm", "group", STATUS, "images_per_second"),
    SEEDS_FILE: (TRIAL_ID, "arm", STATUS, VAL_ACCURACY, FINAL),
}
LOCK_FILE = "driver.lock"
RAY_LOG_FILE = "ray.log"  # Ray's own lines, off the console (tuner.tune.ray_log)
# In a trial's folder: the search's end cut the trial (kind incomplete), and when it had started
# and was cut (Unix seconds: a trial cut before its first report has no other record of them).
CUT_FILE = "cut_by_search_end.json"
CUT_STARTED_UNIX_S, CUT_UNIX_S = "started_unix_s", "cut_unix_s"
# In a trial's folder: its failed attempts so far, for the retry's trainable to report.
RETRIES_FILE = "retries.json"

# Ray Tune's own files (names Ray chooses; listed so the reader does not restate them).
RAY_STATE_GLOB = "experiment_state-*.json"
PARAMS_FILE = "params.json"
RESULT_FILE = "result.json"
ERROR_FILE = "error.txt"
# A run that failed while training is a result, so Ray writes no error.txt: its traceback.
RUN_TRACEBACK_FILE = "error_traceback.txt"
# In a trial's folder: one JSON line per phase of the trial with its wall time (tuner.tune.phases).
PHASES_FILE = "phases.jsonl"

# The files tuner itself writes next to Ray's (copied beside Ray's folder on URI storage).
TUNER_FILES = (
    METADATA_FILE,
    STUDY_FILE,
    REMEASURE_FILE,
    EFFECTS_FILE,
    SEEDS_FILE,
    PROBE_CACHE_FILE,
)

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
