"""The words of a trial's ``speed_choice`` record (issue 48): what the trial's speed phase event
(tuner.tune.trainable) says its choice rested on, rendered by the code the trial used
(:meth:`tuner.speed.rule.SpeedChoice.summary` and ``shared_note``: one owner of the words)."""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from tuner.record import SPEED_CHOICE
from tuner.speed.rule import SAID_FIELDS, SpeedChoice

__all__ = ["KIND", "choice_text", "record_words"]

KIND = SPEED_CHOICE  # the record's kind, the column it fills (its subject: the trial id)


def choice_text(words: Mapping[str, Any]) -> str:
    """The trial's ``speed_choice`` from its record's words: the choice's summary, and the
    training config it was measured on when another than the trial's (``config``: the trial's
    values of those fields)."""
    choice = SpeedChoice.from_dict(dict(words["choice"]))
    return choice.summary() + choice.shared_note(SimpleNamespace(**words["config"]))


def record_words(phases: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A trial's record words from its phase log: its last speed event's (a retried trial's
    new choice replaces the first), None when that event predates the record (no ``choice``)."""
    events = [p for p in phases if p.get("part") == "speed"]
    if not events or not isinstance(events[-1].get("choice"), dict):
        return None
    event = events[-1]
    choice = {k: event["choice"][k] for k in SAID_FIELDS if k in event["choice"]}
    return {
        "choice": choice,
        "keys": [str(k) for k in event.get("keys") or []],
        "config": dict(event.get("config") or {}),
    }
