"""A trial's phase log: one JSON line per phase in its folder (``phases.jsonl``), so a trial's
folder says where its time went: a worker group's start-up (``group_start``), the setup before
its speed probes (the process's one-time costs), each speed-probe run (build, warm-up, steps),
the feasibility check, training, each evaluation, and the end of the run with its parts."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from tuner.errors import error_line
from tuner.experiment import PHASES_FILE

__all__ = ["PhaseLog", "read_phases"]

_log = logging.getLogger(__name__)


class PhaseLog:
    """Appends ``{"t": unix time, "since_start_s": ..., "part": ..., ...}`` lines; a folder
    that cannot be written (none: a unit test; a full disk) costs the log, never the trial."""

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


def read_phases(folder: Path) -> list[dict[str, Any]]:
    """The phase log of a trial folder (empty when it has none, or a line is damaged)."""
    try:
        return [json.loads(line) for line in (folder / PHASES_FILE).read_text().splitlines()]
    except (OSError, ValueError):
        return []
