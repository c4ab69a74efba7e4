"""The words of the report's records on how far an experiment got (built in
:mod:`tuner.report._status` from its metadata, trials and re-measurements): its state, the
trials that ended and those stopped half-way, each step after the trials that did not run and
why, the step a Ctrl-C stopped, the re-measurements that failed, the re-measurement rows, the
image files skipped as unreadable. Each from a record's subjects and ``words`` alone; the
console and the report say the same words (:data:`CONSOLE_KINDS`: the console's too)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tuner.experiment import EFFECTS_FILE, REMEASURE_FILE
from tuner.report.document import user
from tuner.units import plural

__all__ = [
    "CONSOLE_KINDS",
    "EFFECTS_STEP",
    "REMEASURE_STEP",
    "RENDERERS",
    "WARM_START_KEYS",
    "warm_start_text",
    "why_not_run",
]

REMEASURE_STEP, EFFECTS_STEP = "re-measurement", "technique effects"
# The records the console summary says too (tuner.report.console's unfinished work).
CONSOLE_KINDS = frozenset({"stopped_during", "remeasure_failed", "skipped_images"})
# What each step finds nothing to do without, and its table.
_NOTHING = {
    REMEASURE_STEP: f"no candidate ({REMEASURE_FILE})",
    EFFECTS_STEP: f"no recommended config ({EFFECTS_FILE})",
}
# Each state the report states first when unfinished (``unfinished``'s subject).
_HEADS = {
    "interrupted": "**Unfinished: the search was interrupted**; the numbers below are what it "
    "measured before it stopped.",
    "stopped": "**Unfinished: the search stopped without finishing** (its driver is gone, killed "
    "or lost, while the metadata still says running).",
    "unknown": "**State unknown**: the experiment folder has no readable state (no metadata "
    "file): it may be unfinished.",
}


def why_not_run(step: str, words: Mapping[str, Any]) -> str:
    """Why a step after the trials did not run (``why``: off, skipped, running, interrupted,
    stopped during it, nothing), in the words the report and its sections use."""
    why = words["why"]
    if why == "off":
        return f"turned off (--{str(words['option']).replace('_', '-')} 0)"
    if why == "skipped":
        return f"not run: {words['because']}"
    if why == "running":
        return "still running, not reached yet"
    if why == "interrupted":
        return "not run: the search was interrupted before it"
    if why == "stopped":
        return "not finished: the search was interrupted during it"
    return f"not run: {_NOTHING[step]}"


def _unfinished(state: str, words: Mapping[str, Any]) -> str:
    """The report's first words on an unfinished experiment (its resume command, a value, is
    shown after them)."""
    if state == "running":
        return (
            "**Still running**: this report is a snapshot of a search in progress (driven by "
            f"process {words.get('pid') or '?'} on {words.get('host') or '?'}); its numbers and "
            "picks may change."
        )
    return _HEADS.get(state, _HEADS["unknown"])


def _trials_ended(words: Mapping[str, Any]) -> str:
    """How many of the trials asked for ended, and how many stopped half-way."""
    ended, asked, cut = int(words["ended"]), words["asked"], int(words["cut"])
    of = f" of the {asked} asked for" if isinstance(asked, int) else ""
    half = f"; {plural(cut, 'trial')} stopped half-way (incomplete)" if cut else ""
    return f"trials: {plural(ended, 'trial')}{of} ended{half}"


def _remeasure_failed(trials: tuple[str, ...], words: Mapping[str, Any]) -> str:
    """The failed re-measurement runs, counted, and the trials they were of."""
    runs = [int(n) for n in words["runs"]]
    named = ", ".join(f"`{t}` {plural(n, 'run')}" for t, n in zip(trials, runs, strict=True))
    return (
        f"{plural(sum(runs), 're-measurement run')} failed ({plural(len(trials), 'trial')}: "
        f"{named}): a trial none of whose re-measurements finished keeps its figure as measured "
        "in the search."
    )


def _remeasure_rows(words: Mapping[str, Any]) -> str:
    rows, failed = int(words["rows"]), int(words["failed_runs"])
    return (
        f"re-measurements: {REMEASURE_FILE} ({plural(rows, 'row')}, {plural(failed, 'failed run')})"
    )


def _unread(words: Mapping[str, Any]) -> str:
    """What the experiment folder held that could not be read (each problem, user text)."""
    problems = "\n".join(f"- {user(problem)}" for problem in words["problems"])
    return f"**Could not read everything** in the experiment folder:\n\n{problems}"


def _skipped_images(words: Mapping[str, Any]) -> str:
    most, trials = int(words["most"]), int(words["trials"])
    return (
        f"Skipped {most} unreadable image file(s) (the most in one trial; {trials} trial(s) "
        "skipped some): the data folder holds non-images."
    )


# What --warm-start's record in the metadata holds that its words read.
WARM_START_KEYS = ("trials", "from", "left_out", "grid")


def warm_start_text(words: Mapping[str, Any], mark: Callable[[Any], str] = str) -> str:
    """--warm-start's earlier trials: how many, from which experiment, those left out and why,
    and, under --sampler grid, that they run again (``mark``: how a name or reason is shown;
    the report's user text, the console's as it is)."""
    origins = ", ".join(f"{n} from {mark(name)}" for name, n in words["from"].items()) or "none"
    left = "; ".join(f"{n} left out: {mark(why)}" for why, n in words["left_out"].items())
    grid = (
        "; --sampler grid still runs its whole grid (Optuna's GridSampler does not count "
        "trials added to the study): the warm-started points run again"
    )
    return (
        f"warm start: {int(words['trials'])} earlier trials ({origins})"
        + (f"; {left}" if left else "")
        + (grid if words.get("grid") else "")
    )


RENDERERS: dict[str, Callable[[Any], str]] = {
    "state": lambda claim: f"state: {claim.subjects[0]}",
    "unfinished": lambda claim: _unfinished(claim.subjects[0], claim.words),
    "trials_ended": lambda claim: _trials_ended(claim.words),
    "step_not_run": lambda c: f"{c.subjects[0]}: {why_not_run(c.subjects[0], c.words)}",
    "stopped_during": lambda claim: (
        f"Stopped during the {claim.subjects[0]}: it did not finish (--resume runs it)."
    ),
    "remeasure_failed": lambda claim: _remeasure_failed(claim.subjects, claim.words),
    "remeasure_rows": lambda claim: _remeasure_rows(claim.words),
    "skipped_images": lambda claim: _skipped_images(claim.words),
    "warm_start": lambda claim: warm_start_text(claim.words, user),
    "unread": lambda claim: _unread(claim.words),
}
