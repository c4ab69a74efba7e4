"""How far an experiment got: its state, the steps after the trials that did not run and why,
and the re-measurements that failed; the report says these first, so that an unfinished
experiment does not read as final. ``running`` is checked against the driver lock, since a
driver killed with -9 leaves ``running`` behind in the metadata.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tuner.experiment import EFFECTS_FILE, REMEASURE_FILE, Experiment
from tuner.experiment.lock import holder
from tuner.record import ERROR, KIND, STATUS, TRIAL_ID
from tuner.units import plural

__all__ = ["Progress", "progress_of"]

REMEASURE_STEP, EFFECTS_STEP = "re-measurement", "technique effects"


@dataclass(frozen=True)
class Progress:
    """What the report says about how far the experiment got."""

    state: str  # finished | running | interrupted | stopped | unknown
    lead: list[str]  # the report's first blocks: the state, then the steps (none if finished)
    not_run: dict[str, str]  # step -> why it did not run (REMEASURE_STEP, EFFECTS_STEP)
    failures: list[dict[str, Any]]  # each failed re-measurement: {trial_id, error, runs}


def progress_of(experiment: Experiment) -> Progress:
    """The state of ``experiment`` and its steps, in words."""
    meta = experiment.metadata
    state = str(meta.get("state") or "unknown")
    driver = holder(experiment.path) if state == "running" else None
    if state == "running" and driver is None:
        state = "stopped"  # marked running, yet no live driver holds the lock: killed
    not_run = _not_run(experiment, state)
    lead = _lead(experiment, state, driver, not_run)
    return Progress(state, lead, not_run, _remeasure_failures(experiment))


def _lead(
    experiment: Experiment, state: str, driver: dict[str, Any] | None, not_run: dict[str, str]
) -> list[str]:
    if state == "finished":
        return []
    resume = f"`tuner search --resume --name {experiment.name} --storage {experiment.path.parent}`"
    head = {
        "running": "**Still running**: this report is a snapshot of a search in progress "
        f"(driven by process {(driver or {}).get('pid', '?')} on "
        f"{(driver or {}).get('host', '?')}); its numbers and picks may change.",
        "interrupted": "**Unfinished: the search was interrupted**; the numbers below are what "
        f"it measured before it stopped. Resume it with {resume}.",
        "stopped": "**Unfinished: the search stopped without finishing** (its driver is gone, "
        f"killed or lost, while the metadata still says running). Resume it with {resume}.",
    }.get(
        state,
        "**State unknown**: the experiment folder has no readable state "
        "(no metadata file): it may be unfinished.",
    )
    steps = [_trials_line(experiment), *(f"- {step}: {why}" for step, why in not_run.items())]
    return [head, "\n".join(steps)]


def _trials_line(experiment: Experiment) -> str:
    """How many of the trials asked for ended, and how many stopped half-way."""
    trials = experiment.trials
    ended = int((trials[KIND] != "incomplete").sum())
    asked = (experiment.metadata.get("options") or {}).get("num_samples")
    of = f" of the {asked} asked for" if isinstance(asked, int) else ""
    cut = len(trials) - ended
    return f"- trials: {plural(ended, 'trial')}{of} ended" + (
        f"; {plural(cut, 'trial')} stopped half-way (incomplete)" if cut else ""
    )


def _not_run(experiment: Experiment, state: str) -> dict[str, str]:
    options = experiment.metadata.get("options") or {}
    interrupted = (
        "still running, not reached yet"
        if state == "running"
        else "not run: the search was interrupted before it"
    )
    # Each step, its table, the option that turns it off, why it may find nothing to do.
    remeasure = f"no candidate ({REMEASURE_FILE})"
    effects = f"no recommended config ({EFFECTS_FILE})"
    steps = (
        (REMEASURE_STEP, experiment.remeasure, "remeasure_top", remeasure),
        (EFFECTS_STEP, experiment.effects, "effects_repeats", effects),
    )
    found: dict[str, str] = {}
    for step, table, option, nothing in steps:
        if not _empty(table):
            continue
        if options.get(option) == 0:
            found[step] = f"turned off (--{option.replace('_', '-')} 0)"
        elif experiment.metadata.get("skipped_after_trials"):
            found[step] = f"not run: {experiment.metadata['skipped_after_trials']}"
        else:
            found[step] = interrupted if state != "finished" else f"not run: {nothing}"
    return found


def _remeasure_failures(experiment: Experiment) -> list[dict[str, Any]]:
    """Each failed re-measurement as ``{trial_id, error, runs}``: every row of ``remeasure.csv``
    whose status is not ok, and the metadata's record (``remeasure_failures``) of those that
    left no row."""
    runs: Counter[tuple[str, str]] = Counter()
    table = experiment.remeasure
    if not _empty(table) and STATUS in table:
        for _, row in table[table[STATUS].astype(str) != "ok"].iterrows():
            error = row.get(ERROR)
            text = error if isinstance(error, str) and error else f"status {row[STATUS]}"
            runs[(str(row[TRIAL_ID]), text)] += 1
    for item in experiment.metadata.get("remeasure_failures") or []:
        if isinstance(item, dict):
            key = (str(item.get(TRIAL_ID, "?")), str(item.get(ERROR) or "no message"))
            runs[key] = runs[key] or 1
    return [{TRIAL_ID: tid, ERROR: error, "runs": n} for (tid, error), n in runs.items()]


def _empty(table: pd.DataFrame | None) -> bool:
    return table is None or table.empty
