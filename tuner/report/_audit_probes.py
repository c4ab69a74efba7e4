"""The probe seconds, checked against the clock's records: every figure that states them (a
trial's ``speed_probe_time_s``, the console's ``probes X s of Y s`` and ``Speed-probe budget``
lines, the metadata's pool) is the one quantity, the probe runs' wall time, each run from its
start to its end as its ``probe`` line in the trial's phase log has it
(:attr:`tuner.speed.rule.SpeedChoice.probe_seconds`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.experiment import read_phases
from tuner.experiment.limits import CLOCK
from tuner.record import SPEED_PROBE_BUDGET_S, SPEED_PROBE_TIME_S, TRIAL_DIR, TRIAL_ID
from tuner.report._audit_text import Finding
from tuner.units import plural

__all__ = ["DURATION", "check_console_probes", "check_probe_seconds", "pool_spent_s"]

DURATION = "duration"
# A probe line keeps its run's wall time in milliseconds.
_RUN_SLACK_S = 0.0006
_CONSOLE_END = re.compile(
    r"^\[[^\]]*\] \w[\w ]*?\s+(\w+)  .*?  probes (\d+\.\d) s(?: of (\d+\.\d) s)?(?:  \(.*\))?$"
)
_CONSOLE_TOTAL = re.compile(r"^Speed-probe budget: (\d+\.\d) s spent of the")


def check_probe_seconds(
    path: Path, trials: pd.DataFrame, metadata: Mapping[str, Any], where: str
) -> list[Finding]:
    """Each trial's ``speed_probe_time_s`` is its probe runs' wall time summed, as its phase log
    has them (trials from before the log counted its runs are skipped); the metadata's pool
    spent is what every settled, bounded probe session since the search's last start charged it
    (its trial's speed line; none with --probe-share off, in a data-parallel trial, or for a
    trial cut during its probes: nothing was charged)."""
    found = []
    logs = _phase_logs(path, trials)
    for trial_id, lines in logs.items():
        why = _trial_problem(lines, _row_value(trials, trial_id, SPEED_PROBE_TIME_S))
        if why:
            found.append(Finding(DURATION, where, f"trial {trial_id}'s probe seconds", why))
    spent = pool_spent_s(metadata)
    if spent is not None:
        charged = _charged_since(logs.values(), _last_start(metadata))
        if abs(sum(charged) - spent) > _RUN_SLACK_S * len(charged) + 0.01:
            why = (
                f"the probe sessions it charged since the search's last start add up to "
                f"{sum(charged):.3f} s ({plural(len(charged), 'speed line')} in the trials' "
                "phase logs)"
            )
            found.append(Finding(DURATION, "metadata", f"the pool spent {spent:.3f} s", why))
    return found


def check_console_probes(
    console: str, trials: pd.DataFrame, metadata: Mapping[str, Any]
) -> list[Finding]:
    """Each trial's console end line states its trials.csv probe seconds and budget (tenths),
    and the ``Speed-probe budget`` total is the metadata's pool."""
    found = []
    for line in console.splitlines():
        end = _CONSOLE_END.match(line.rstrip())
        if end and (why := _end_line_problem(end, trials)):
            found.append(Finding(DURATION, "console", line.strip(), why))
        total = _CONSOLE_TOTAL.match(line)
        spent = pool_spent_s(metadata)
        if total and spent is not None and total.group(1) != f"{spent:.1f}":
            why = f"the metadata's pool spent {spent:.1f} s (its probe runs, summed)"
            found.append(Finding(DURATION, "console", line.strip(), why))
    return found


def pool_spent_s(metadata: Mapping[str, Any]) -> float | None:
    """The probe pool's spending the search's last run recorded (None: none recorded)."""
    pool = (metadata.get("probe_cache") or {}).get("probe_budget") or {}
    spent = pool.get("spent_s")
    return float(spent) if isinstance(spent, int | float) else None


def _end_line_problem(end: re.Match[str], trials: pd.DataFrame) -> str:
    trial_id, said, of = end.group(1), end.group(2), end.group(3)
    if trial_id not in set(trials.get(TRIAL_ID, pd.Series(dtype=str)).astype(str)):
        return ""
    spent = _row_value(trials, trial_id, SPEED_PROBE_TIME_S)
    if spent is not None and said != f"{spent:.1f}":
        return f"trials.csv's {SPEED_PROBE_TIME_S} is {spent:.1f}"
    allowed = _row_value(trials, trial_id, SPEED_PROBE_BUDGET_S)
    if of is not None and allowed is not None and of != f"{allowed:.1f}":
        return f"trials.csv's {SPEED_PROBE_BUDGET_S} is {allowed:.1f}"
    return ""


def _trial_problem(lines: list[dict[str, Any]], row_s: float | None) -> str:
    """Why the trial's stated probe seconds are not its runs' ("" when they are)."""
    last = max((i for i, line in enumerate(lines) if line.get("part") == "speed"), default=None)
    if last is None or not isinstance(lines[last].get("runs"), int):
        return ""  # no probes settled, or a log from before the runs were counted
    count = lines[last]["runs"]
    runs = [float(x["wall_s"]) for x in lines[:last] if x.get("part") == "probe"][-count:]
    runs = runs if count else []
    if len(runs) != count:
        return f"its phase log has {len(runs)} probe runs before its speed line, which says {count}"
    total, slack = sum(runs), _RUN_SLACK_S * count + 0.002
    stated = lines[last].get("probe_s")
    if isinstance(stated, int | float) and abs(stated - total) > slack:
        return f"its speed line says {stated:.3f} s, its {count} probe runs {total:.3f} s"
    if row_s is not None and abs(row_s - total) > slack:
        return f"trials.csv says {row_s:.3f} s, its {count} probe runs {total:.3f} s"
    return ""


def _phase_logs(path: Path, trials: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Each trial's phase log lines (trial id -> lines; a trial without one is left out)."""
    logs = {}
    for _, row in trials.iterrows():
        folder = row.get(TRIAL_DIR)
        lines = read_phases(path / folder) if isinstance(folder, str) and folder else []
        if lines:
            logs[str(row[TRIAL_ID])] = lines
    return logs


def _row_value(trials: pd.DataFrame, trial_id: str, key: str) -> float | None:
    if key not in trials or TRIAL_ID not in trials:
        return None
    values = pd.to_numeric(trials.loc[trials[TRIAL_ID].astype(str) == trial_id, key], "coerce")
    value = float(values.iloc[0]) if len(values) else math.nan
    return None if math.isnan(value) else value


def _last_start(metadata: Mapping[str, Any]) -> float:
    """When the search's last run began: the end of its last down time (0: it ran once)."""
    clock = metadata.get(CLOCK)
    down = clock.get("down_unix_s") if isinstance(clock, dict) else None
    return max((float(end) for _, end in down or ()), default=0.0)


def _charged_since(logs: Iterable[list[dict[str, Any]]], since: float) -> list[float]:
    """The probe seconds of each speed line since ``since`` whose session had a budget (its
    runs were charged to the pool: tuner.speed.session)."""
    return [
        float(line.get("probe_s") or 0.0)
        for lines in logs
        for line in lines
        if line.get("part") == "speed"
        and line.get("budget_s") is not None
        and float(line.get("t") or 0.0) >= since
    ]
