"""How far an experiment got: its state, the steps after the trials that did not run and why,
the step a Ctrl-C stopped, the re-measurements that failed, the image files skipped; the report
says these first, so that an unfinished experiment does not read as final, and the console says
what did not finish. Each is a record (:func:`status_claims`, its words
:mod:`tuner.report._status_words`), built here from the metadata, the trials and the
re-measurements, by the report, the console and the auditor alike. ``running`` is checked
against the driver lock, since a driver killed with -9 leaves ``running`` behind in the
metadata.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tuner.experiment import Experiment
from tuner.experiment.lock import holder
from tuner.record import ERROR, KIND, STATUS, TRIAL_ID
from tuner.report._status_words import (
    EFFECTS_STEP,
    REMEASURE_STEP,
    WARM_START_KEYS,
    why_not_run,
)
from tuner.report.claims import Claim, Claims
from tuner.report.document import code

__all__ = [
    "EFFECTS_STEP",
    "REMEASURE_STEP",
    "Progress",
    "progress_of",
    "status_claims",
    "status_details",
    "status_lead",
    "unfinished_work",
]

SKIPPED_IMAGES = "skipped_images"  # tuner.engine.result.RunResult.skipped_images


@dataclass(frozen=True)
class Progress:
    """How far the experiment got, as the records say it."""

    state: str  # finished | running | interrupted | stopped | unknown
    driver: dict[str, Any] | None  # the live driver holding the lock (running)
    steps: dict[str, dict[str, Any]]  # step -> why it did not run (step_not_run's words)
    failures: list[dict[str, Any]]  # each failed re-measurement: {trial_id, error, runs}

    @property
    def not_run(self) -> dict[str, str]:
        """step -> why it did not run, in its record's words."""
        return {step: why_not_run(step, words) for step, words in self.steps.items()}


def progress_of(experiment: Experiment) -> Progress:
    """The state of ``experiment`` and its steps."""
    meta = experiment.metadata
    state = str(meta.get("state") or "unknown")
    driver = holder(experiment.path) if state == "running" else None
    if state == "running" and driver is None:
        state = "stopped"  # marked running, yet no live driver holds the lock: killed
    steps = _not_run(experiment, state)
    return Progress(state, driver, steps, _remeasure_failures(experiment))


def status_claims(experiment: Experiment) -> list[Claim]:
    """The records of how far the experiment got (placed by :func:`status_lead`,
    :func:`status_details`, :func:`unfinished_work` and section 1's failures)."""
    progress = progress_of(experiment)
    driver = progress.driver or {}
    claims = [
        Claim("state", (progress.state,)),
        Claim("trials_ended", (), (), _trials_words(experiment)),
        *(Claim("step_not_run", (step,), (), why) for step, why in progress.steps.items()),
        Claim("remeasure_rows", (), (), _rows_words(experiment, progress)),
    ]
    if progress.state != "finished":
        words = {"pid": driver.get("pid"), "host": driver.get("host")} if driver else {}
        claims.append(Claim("unfinished", (progress.state,), (), words))
    step = experiment.metadata.get("interrupted_during")
    if step:
        claims.append(Claim("stopped_during", (str(step),)))
    claims += _failure_claims(progress.failures) + _skipped_claims(experiment.trials)
    return claims + _folder_claims(experiment)


def _folder_claims(experiment: Experiment) -> list[Claim]:
    """What the folder held that could not be read (the loader's problems), and the trials
    --warm-start took from an earlier experiment (its metadata's record: an older record
    without every key is shown as it was written)."""
    claims = []
    if experiment.problems:
        claims.append(Claim("unread", (), (), {"problems": list(map(str, experiment.problems))}))
    warm = experiment.metadata.get("warm_start")
    if isinstance(warm, dict) and all(key in warm for key in WARM_START_KEYS):
        words = {key: warm[key] for key in WARM_START_KEYS}
        claims.append(Claim("warm_start", (), (), words))
    return claims


def _trials_words(experiment: Experiment) -> dict[str, Any]:
    trials = experiment.trials
    ended = int((trials[KIND] != "incomplete").sum()) if KIND in trials else 0
    asked = (experiment.metadata.get("options") or {}).get("num_samples")
    return {
        "ended": ended,
        "asked": asked if isinstance(asked, int) and asked > 0 else None,  # -1: until the budget
        "cut": len(trials) - ended,
    }


def _rows_words(experiment: Experiment, progress: Progress) -> dict[str, Any]:
    rows = 0 if experiment.remeasure is None else len(experiment.remeasure)
    return {"rows": rows, "failed_runs": sum(int(f["runs"]) for f in progress.failures)}


def _failure_claims(failures: list[dict[str, Any]]) -> list[Claim]:
    """The failed re-measurement runs, by trial (its runs summed over its errors)."""
    runs: Counter[str] = Counter()
    for failure in failures:
        runs[str(failure[TRIAL_ID])] += int(failure["runs"])
    if not runs:
        return []
    return [Claim("remeasure_failed", tuple(runs), (), {"runs": list(runs.values())})]


def _skipped_claims(trials: pd.DataFrame) -> list[Claim]:
    """The unreadable image files the trials skipped: the most in one trial, how many did."""
    skipped = pd.to_numeric(trials.get(SKIPPED_IMAGES, pd.Series(dtype=float)), errors="coerce")
    skipped = skipped.fillna(0)
    if not skipped.sum() > 0:
        return []
    words = {"most": int(skipped.max()), "trials": int((skipped > 0).sum())}
    return [Claim("skipped_images", (), (), words)]


def status_lead(experiment: Experiment, progress: Progress, claims: Claims) -> list[str]:
    """The report's first blocks on an unfinished experiment (none if finished): its state and
    how to resume it, the step a Ctrl-C stopped, the trials that ended, the steps not run."""
    if progress.state == "finished":
        return []
    head = claims.text("unfinished", progress.state)
    if progress.state in ("interrupted", "stopped"):
        storage = experiment.path.parent
        command = f"tuner search --resume --name {experiment.name} --storage {storage}"
        head += f" Resume it with {code(command)}."
    stopped = experiment.metadata.get("interrupted_during")
    steps = [
        *([f"- {claims.text('stopped_during', str(stopped))}"] if stopped else []),
        f"- {claims.text('trials_ended')}",
        *(f"- {claims.text('step_not_run', step)}" for step in progress.steps),
    ]
    return [head, "\n".join(steps)]


def status_details(experiment: Experiment, progress: Progress, claims: Claims) -> list[str]:
    """The details list's lines on how far it got: its state, and each record of it the
    report has not said yet (the lead and section 1 say them first): each says its words once,
    so that a sentence tampered in one place is not found intact in another."""
    unsaid = [
        claim
        for claim in claims.all.values()
        if claim.kind in ("step_not_run", *_STATUS_WORK) and claim.key not in claims.placed
    ]
    return [
        f"- {claims.text('state', progress.state)}",
        *(f"- {claims.text(claim.kind, *claim.subjects)}" for claim in unsaid),
    ]


# What did not run or was left out: the records the console says after the counts.
_STATUS_WORK = ("stopped_during", "remeasure_failed", "skipped_images")


def unfinished_work(claims: Claims) -> list[str]:
    """What did not run or was left out, in its records' words (the console's; the report's
    lead, section 1 and details): the step Ctrl-C stopped, failed re-measurements, image files
    skipped."""
    return [
        claims.text(claim.kind, *claim.subjects)
        for kind in _STATUS_WORK
        for claim in claims.all.values()
        if claim.kind == kind
    ]


def _not_run(experiment: Experiment, state: str) -> dict[str, dict[str, Any]]:
    """Each step after the trials that has no rows, and why (step_not_run's words)."""
    options = experiment.metadata.get("options") or {}
    skipped = experiment.metadata.get("skipped_after_trials")
    during = experiment.metadata.get("interrupted_during")  # the step a Ctrl-C stopped
    steps = (
        (REMEASURE_STEP, experiment.remeasure, "remeasure_top"),
        (EFFECTS_STEP, experiment.effects, "effects_repeats"),
    )
    found: dict[str, dict[str, Any]] = {}
    for step, table, option in steps:
        if not _empty(table):
            continue
        if options.get(option) == 0:
            found[step] = {"why": "off", "option": option}
        elif skipped:
            found[step] = {"why": "skipped", "because": str(skipped)}
        elif state == "running":
            found[step] = {"why": "running"}
        elif state != "finished":
            found[step] = {"why": "stopped" if during == step else "interrupted"}
        else:
            found[step] = {"why": "nothing"}
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
