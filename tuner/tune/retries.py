"""A trial Tune retries (``--max-failures``), said and kept: one console line, and its failed
attempts in the trial's folder, which the retry's trainable reads and reports
(:data:`tuner.record.RETRIES`, :data:`tuner.record.LAST_ERROR`).
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path
from typing import Any

from ray import cloudpickle
from ray.tune import Callback

from tuner import record
from tuner.experiment import RETRIES_FILE

__all__ = ["RetryRecord", "attempt_text", "failure_line", "read_retries"]

_log = logging.getLogger(__name__)
_CHARS = 300


def failure_line(trial: Any) -> str:
    """The failed attempt's error in one line, from the files Tune has just written in the
    driver's copy of the trial's folder (``get_pickled_error`` reads the storage's, not synced
    yet at a retry)."""
    error: Any = None
    # An error Ray could not pickle (or none written): its text below.
    with contextlib.suppress(Exception), open(trial.pickled_error_file, "rb") as pickled:
        error = cloudpickle.load(pickled)
    if error is not None:
        cause = getattr(error, "cause", None) or error
        first = (str(cause).strip().splitlines() or [""])[0]
        return f"{type(cause).__name__}: {first}"[:_CHARS]
    text = ""
    with contextlib.suppress(Exception):
        text = Path(trial.error_file).read_text()
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "unknown error")[:_CHARS]


def attempt_text(trial: Any) -> str:
    attempt = int(trial.num_failures) + 1
    most = int(trial.max_failures)
    return f"attempt {attempt} of {most + 1}" if most >= 0 else f"attempt {attempt}"


class RetryRecord(Callback):
    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        kept = {record.RETRIES: int(trial.num_failures), record.LAST_ERROR: failure_line(trial)}
        try:
            filesystem = trial.storage.storage_filesystem
            # An attempt that died before its first report left no folder (seen on an H200).
            filesystem.create_dir(trial.path, recursive=True)
            with filesystem.open_output_stream(f"{trial.path}/{RETRIES_FILE}") as out:
                out.write(json.dumps(kept).encode())
        except Exception as exc:  # the console line and error.txt still say it
            _log.warning("could not record trial %s's retry: %s", trial.trial_id, exc)


def read_retries(folder: str | None) -> tuple[int, str]:
    if folder is None:
        return 0, ""
    try:
        kept = json.loads((Path(folder) / RETRIES_FILE).read_text())
    except (OSError, ValueError):
        return 0, ""
    return int(kept.get(record.RETRIES, 0)), str(kept.get(record.LAST_ERROR, ""))
