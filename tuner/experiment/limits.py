"""The two limits of a search that a resume can move: its trials in all (``--num-samples``) and
their time in all (``--search-time-budget-s``, every run together, on the clock kept here).
Ray Tune pickles its own copy of both and ``Tuner.restore`` takes neither anew, so the metadata
holds them and the objects Ray pickles read them from there when built or restored. Ray-free:
a resume's new limit is checked before Ray loads.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.errors import TunerError
from tuner.experiment._files import RAY_STATE_GLOB, RESULT_FILE, STUDY_FILE, STUDY_TRIAL_ID_ATTR
from tuner.experiment._metadata import read_metadata, update_metadata
from tuner.experiment._read import load_study

__all__ = [
    "CLOCK",
    "LIMITS",
    "NUM_SAMPLES",
    "TIME_BUDGET",
    "SearchLimits",
    "down_time_s",
    "limit_note",
    "new_clock",
    "read_limits",
    "settle_clock",
    "start_clock",
    "stop_clock",
]

# The metadata's keys: the trial count (-1: as many as the time budget allows), the budget in
# seconds (None: none), and the clock {"used_s": what the runs that ended took, "since_unix_s":
# when the running one's trials began, or None; "stopped_unix_s": when the last run's trials
# stopped; "down_unix_s": [from, to] of each time no run was on between two}. A folder without
# the clock was started by an older tuner, whose limits Ray Tune keeps: they cannot move.
NUM_SAMPLES = "num_samples"
TIME_BUDGET = "search_time_budget_s"
CLOCK = "search_clock"
LIMITS = (NUM_SAMPLES, TIME_BUDGET)  # the SearchOptions fields of the same names


@dataclass(frozen=True)
class SearchLimits:
    """A search's limits and its clock, as the metadata holds them now."""

    num_samples: int  # trials in all; -1: as many as the time budget allows
    time_budget_s: float | None  # seconds its trials may run, every run together
    used_s: float  # seconds its trials ran in the runs that ended
    since_unix_s: float | None  # when this run's trials began (None: no run is on)

    def used_by(self, now_unix_s: float) -> float:
        """Seconds the trials have run by ``now_unix_s``, every run together."""
        running = 0.0 if self.since_unix_s is None else max(0.0, now_unix_s - self.since_unix_s)
        return self.used_s + running

    def time_is_up(self, now_unix_s: float) -> bool:
        return self.time_budget_s is not None and self.used_by(now_unix_s) >= self.time_budget_s

    def ended(self, *, started: int, now_unix_s: float) -> bool:
        """Whether the search starts no more trials, having started ``started``."""
        counted = 0 < self.num_samples <= started
        return counted or self.time_is_up(now_unix_s)

    @property
    def sample_budget(self) -> int | None:
        """How many trials in all; None: as many as the time budget allows."""
        return self.num_samples if self.num_samples > 0 else None


def read_limits(folder: Path | str) -> SearchLimits | None:
    """The limits in the metadata at ``folder``; None: an older tuner's (no clock) or none."""
    metadata = read_metadata(Path(folder))
    clock = metadata.get(CLOCK)
    if not isinstance(clock, dict) or NUM_SAMPLES not in metadata:
        return None
    budget = metadata.get(TIME_BUDGET)
    return SearchLimits(
        num_samples=int(metadata[NUM_SAMPLES]),
        time_budget_s=None if budget is None else float(budget),
        used_s=float(clock.get("used_s") or 0.0),
        since_unix_s=clock.get("since_unix_s"),
    )


def new_clock() -> dict[str, Any]:
    """The clock a new search's metadata starts with: nothing run yet."""
    return {"used_s": 0.0, "since_unix_s": None}


def settle_clock(folder: Path) -> None:
    """Before a resume writes into the folder: a run that never stopped the clock (its driver
    was killed) is counted until the last file it wrote."""
    clock = read_metadata(folder).get(CLOCK)
    if isinstance(clock, dict) and clock.get("since_unix_s") is not None:
        stopped = _last_written(folder, clock["since_unix_s"])
        update_metadata(folder, **{CLOCK: _stopped(clock, stopped)})


def start_clock(folder: Path) -> None:
    """This run's trials begin now; the time since the last run stopped was down time."""
    metadata = read_metadata(folder)
    clock = metadata.get(CLOCK)
    if not isinstance(clock, dict):
        return
    now = time.time()
    used = _used_s(folder, metadata)
    down = list(clock.get("down_unix_s") or [])
    stopped = clock.get("stopped_unix_s")
    if stopped is not None and now > stopped:
        down.append([stopped, now])
    started = {"used_s": used, "since_unix_s": now, "stopped_unix_s": None, "down_unix_s": down}
    update_metadata(folder, **{CLOCK: {**clock, **started}})


def stop_clock(folder: Path) -> None:
    """This run's trials ended (or stopped): their time is added to the clock."""
    clock = read_metadata(folder).get(CLOCK)
    if isinstance(clock, dict) and clock.get("since_unix_s") is not None:
        update_metadata(folder, **{CLOCK: _stopped(clock, time.time())})


def _stopped(clock: dict[str, Any], at_unix_s: float) -> dict[str, Any]:
    """``clock`` stopped at ``at_unix_s``: the running run's time added to what was used."""
    used = float(clock.get("used_s") or 0.0) + max(0.0, at_unix_s - clock["since_unix_s"])
    return {**clock, "used_s": used, "since_unix_s": None, "stopped_unix_s": at_unix_s}


def down_time_s(metadata: Mapping[str, Any], started: float, ended: float) -> float:
    """Seconds between ``started`` and ``ended`` (Unix) with no run of the search on."""
    clock = metadata.get(CLOCK)
    down = clock.get("down_unix_s") if isinstance(clock, dict) else None
    overlap = 0.0
    for begin, end in down or ():
        overlap += max(0.0, min(float(end), ended) - max(float(begin), started))
    return overlap


def _used_s(folder: Path, metadata: dict[str, Any]) -> float:
    """Seconds the trials ran in every run before now: a run whose clock is still on was
    killed, and counts up to the last file its trials, Ray or the study wrote."""
    clock = metadata.get(CLOCK) or {}
    used = float(clock.get("used_s") or 0.0)
    since = clock.get("since_unix_s")
    if since is None:
        return used
    return used + max(0.0, _last_written(folder, since) - since)


def _last_written(folder: Path, since: float) -> float:
    """When the trials, Ray or the study last wrote into ``folder`` (``since`` at the least)."""
    written = [folder / STUDY_FILE, *folder.glob(RAY_STATE_GLOB), *folder.glob(f"*/{RESULT_FILE}")]
    last = max((p.stat().st_mtime for p in written if p.is_file()), default=since)
    return min(last, time.time())


def limit_note(name: str, value: Any, *, folder: Path, own: Any) -> str:
    """The note that says what a new ``--num-samples`` or ``--search-time-budget-s`` does on
    this resume of the experiment at ``folder`` (``own``: its options), or why it cannot."""
    metadata = read_metadata(folder)
    experiment = str(metadata.get("name") or folder.name)
    flag = "--" + name.replace("_", "-")
    if read_limits(folder) is None:
        raise TunerError(
            f"{flag} {value:g} cannot change on --resume of {experiment}: an older tuner "
            "started it, and Ray Tune keeps its trial count and time budget; leave "
            f"{flag} out, or start a new search with it and --warm-start {experiment}."
        )
    if name == NUM_SAMPLES:
        return _samples_note(int(value), folder=folder, experiment=experiment, own=own)
    return _budget_note(float(value), folder=folder, metadata=metadata, experiment=experiment)


def _samples_note(value: int, *, folder: Path, experiment: str, own: Any) -> str:
    started = trials_started(folder, experiment)
    if value < started:
        raise TunerError(
            f"--num-samples {value} is below the {started} trials {experiment} has started; "
            f"give {started} or more (the trials it ran are kept, never run again)."
        )
    grid = _grid_size(own)
    if grid is not None and value > grid:
        raise TunerError(
            f"--num-samples {value} is more than the {grid} configurations of the grid "
            f"{experiment} searches (more trials would repeat them); give at most {grid}, or "
            f"start a new search with another --sampler and --warm-start {experiment}."
        )
    return (
        f"--num-samples {value} applies from this resume on: {experiment} runs up to {value} "
        f"trials in all ({started} started before; they are kept, not run again)."
    )


def _budget_note(value: float, *, folder: Path, metadata: dict[str, Any], experiment: str) -> str:
    used = _used_s(folder, metadata)
    if value <= used:
        raise TunerError(
            f"--search-time-budget-s {value:g} is not more than the {used:.0f} s the search "
            f"{experiment} has run its trials already (the budget counts every run together); "
            f"give more than {math.ceil(used)}."
        )
    return (
        f"--search-time-budget-s {value:g} applies from this resume on: the search "
        f"{experiment} runs its trials for up to {value:g} s in all, every run together "
        f"({used:.0f} s used, {value - used:.0f} s left)."
    )


def trials_started(folder: Path, study_name: str) -> int:
    """How many trials the search has asked the sampler for (warm-started ones not counted)."""
    study = load_study(folder / STUDY_FILE, study_name)
    if study is None:
        return 0
    # A trial an interrupt closed and a resume went on with has two Optuna trials: one Ray id.
    attrs = [trial.user_attrs for trial in study.get_trials(deepcopy=False)]
    return len({a[STUDY_TRIAL_ID_ATTR] for a in attrs if STUDY_TRIAL_ID_ATTR in a})


def _grid_size(own: Any) -> int | None:
    """How many configurations a grid search has (None: another sampler)."""
    if own.sampler != "grid":
        return None
    from tuner.spaces import get_space

    grid = get_space(own.space).grid
    return math.prod(len(values) for values in grid.values()) if grid else None
