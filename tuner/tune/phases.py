"""A trial's phase log: one JSON line per phase in its folder (``phases.jsonl``), saying where
its time went."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from tuner.errors import error_line
from tuner.experiment import PHASES_FILE, read_phases

__all__ = ["PhaseLog", "read_phases"]

_log = logging.getLogger(__name__)


class PhaseLog:
    """A folder that cannot be written costs the log, never the trial."""

    def __init__(self, folder: str | None, started_unix_s: float) -> None:
        self.path = None if folder is None else Path(folder) / PHASES_FILE
        self.started = started_unix_s

    def write(self, phase: str, **fields: Any) -> None:
        if self.path is None:
            return
        now = time.time()
        line = {"t": round(now, 3), "since_start_s": round(now - self.started, 3), "part": phase}
        try:
            with self.path.open("a") as file:
                file.write(json.dumps({**line, **fields}, default=str) + "\n")
        except OSError as exc:
            _log.warning("could not write the phase log: %s", error_line(exc))
            self.path = None
