"""trials.csv's ``speed_choice`` as records (issue 48): one per trial whose phase log says what
its choice rested on (the probe-cache keys, the choice, its config's fields), placed in the
report's trials.csv; and the auditor's checks of them: each trial's ``speed_choice`` is its
record's text, and every probed row the record states is the probe cache's row of the same key
and knob (a key a later trial completed keeps the earlier rows: the record's are a subset)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tuner.experiment import CLAIMS_FILE, PROBE_CACHE_FILE, Experiment, read_phases
from tuner.record import SPEED_CHOICE, TRIAL_DIR, TRIAL_ID
from tuner.report._audit_text import Finding
from tuner.report._speed_words import KIND, record_words
from tuner.report.claims import Claim, Claims
from tuner.speed.rule import probe_text
from tuner.units import plural

__all__ = ["check_speed_choices", "speed_choice_claims", "with_speed_choices"]

CHECK = "claim"  # the auditor's check these findings belong to (_audit_claims.CLAIM)
# A probed row's figures the cache must hold alike, and how many trials a note names.
_ROW_KEYS = ("ratio", "low", "high", "pairs", "kept")
_NAMED = 5


def speed_choice_claims(experiment: Experiment) -> list[Claim]:
    """One record per trial whose speed phase event keeps its choice (none before issue 48's
    records, none where the probes were off)."""
    trials = experiment.trials
    if TRIAL_DIR not in trials:
        return []
    claims = []
    for tid, folder in zip(trials[TRIAL_ID].astype(str), trials[TRIAL_DIR], strict=True):
        if not isinstance(folder, str) or not folder:
            continue
        words = record_words(read_phases(experiment.path / folder))
        if words is not None:
            claims.append(Claim(KIND, (tid,), (), words))
    return claims


def with_speed_choices(table: pd.DataFrame, claims: Claims) -> pd.DataFrame:
    """``table`` (trials.csv's rows) with each recorded trial's ``speed_choice`` its record's
    text (placing the record: claims.json keeps it); a trial without a record keeps its own."""
    if SPEED_CHOICE not in table or TRIAL_ID not in table:
        return table
    table = table.copy()
    for i, tid in table[TRIAL_ID].astype(str).items():
        text = claims.text(KIND, tid)
        if text:
            table.at[i, SPEED_CHOICE] = text
    return table


def check_speed_choices(
    claims: list[Claim],
    rows: pd.DataFrame,
    where: str,
    experiment: Experiment | None,
) -> tuple[list[Finding], list[str]]:
    """The findings and the notes: each trial's ``speed_choice`` in ``rows`` (the report's
    trials.csv) and, with the experiment, in its own trials (what the trial wrote) is its
    record's text; each record's probed rows are the probe cache's. A trial with a
    ``speed_choice`` and no record is named in a note as not checked."""
    records = {c.subjects[0]: c for c in claims if c.kind == KIND and c.subjects}
    found = _against_rows(records, rows, where)
    notes = _unchecked(records, rows, where)
    if experiment is None:
        if records:
            notes.append(f"{where}: speed_choice records not checked against the probe cache "
                         "(a report alone: no experiment)")  # fmt: skip
        return found, notes
    # A trial that never reported (cut before its first evaluation) has no speed_choice there.
    found += _against_rows(records, experiment.trials, "the experiment's trials", reported=True)
    cache, probed = experiment.probe_cache or {}, _probed_themselves(experiment)
    for trial, claim in records.items():
        problems, gaps = _cache_problems(claim.words, cache)
        if trial in probed:  # a row of its own runs the cache did not keep is no contradiction
            notes += [f"{claim.name()}: {why} (measured by its own probe runs; the cache kept "
                      "a session's verdict that left it unprobed: a resumed search's)"
                      for why in gaps]  # fmt: skip
        else:
            problems += gaps
        found += [Finding(CHECK, CLAIMS_FILE, claim.name(), why) for why in problems]
    return found, notes


def _probed_themselves(experiment: Experiment) -> set[str]:
    """The trials whose phase log has probe runs of their own (a resumed search's long-tier
    test: a trial's measured host_prefetch that probe_cache.json, keeping a later session's
    verdict, held as not probed)."""
    trials = experiment.trials
    if TRIAL_DIR not in trials:
        return set()
    return {
        str(tid)
        for tid, folder in zip(trials[TRIAL_ID], trials[TRIAL_DIR], strict=True)
        if isinstance(folder, str)
        and folder
        and any(p.get("part") == "probe" for p in read_phases(experiment.path / folder))
    }


def _said(rows: pd.DataFrame) -> dict[str, str]:
    """trial id -> its ``speed_choice`` ("" where none)."""
    if SPEED_CHOICE not in rows or TRIAL_ID not in rows:
        return {}
    texts = rows[SPEED_CHOICE].astype(object).where(rows[SPEED_CHOICE].notna(), "")
    return dict(zip(rows[TRIAL_ID].astype(str), texts.astype(str), strict=True))


def _against_rows(
    records: Mapping[str, Claim], rows: pd.DataFrame, where: str, *, reported: bool = False
) -> list[Finding]:
    """Each record's text is its trial's ``speed_choice`` in ``rows`` (``reported``: only where
    the trial wrote one)."""
    said = _said(rows)
    found = []
    for trial, claim in records.items():
        if reported and not said.get(trial):
            continue
        if trial not in said:
            why = f"{where} has no speed_choice of trial {trial}"
        elif said[trial] != claim.text:
            why = (
                f"{where} has speed_choice {said[trial]!r} for trial {trial}, its record "
                f"{claim.text!r}"
            )
        else:
            continue
        found.append(Finding(CHECK, CLAIMS_FILE, claim.name(), why))
    return found


def _unchecked(records: Mapping[str, Claim], rows: pd.DataFrame, where: str) -> list[str]:
    """A note naming the trials whose ``speed_choice`` has no record (not checked)."""
    left = [t for t, text in _said(rows).items() if text and t not in records]
    if not left:
        return []
    named = ", ".join(left[:_NAMED]) + (
        f" and {len(left) - _NAMED} more" if len(left) > _NAMED else ""
    )
    return [
        f"{where}: the speed_choice of {plural(len(left), 'trial')} not checked ({named}): its "
        "phase log keeps no speed choice (a trial written before issue 48's records)"
    ]


def _cache_problems(
    words: Mapping[str, Any], cache: Mapping[str, Any]
) -> tuple[list[str], list[str]]:
    """Why the record's probed rows are not the probe cache's under its keys: rows the cache
    holds otherwise (or not at all), and rows it holds only as not probed (gaps)."""
    keys = [str(k) for k in words.get("keys") or []]
    missing = [k for k in keys if not isinstance(cache.get(k), Mapping)]
    if missing:
        return [f"{PROBE_CACHE_FILE} has no entry of its key {missing[0]}"], []
    cached = [v for k in keys for v in cache[k].get("variants") or [] if isinstance(v, Mapping)]
    problems: list[str] = []
    gaps: list[str] = []
    for row in (words.get("choice") or {}).get("variants") or []:
        if row.get("probed") is False:
            continue  # a placeholder: a later trial may have probed it since
        same = [v for v in cached if v.get("name") == row.get("name")]
        if not any(_same_row(row, v) for v in same):
            there = "; ".join(probe_text(v) for v in same) or "no such row"
            why = (
                f"its {row.get('name')} ({probe_text(row)}, kept {row.get('kept')}) is not "
                f"{PROBE_CACHE_FILE}'s under its keys ({there})"
            )
            unprobed = same and all(v.get("probed") is False for v in same)
            (gaps if unprobed else problems).append(why)
    return problems, gaps


def _same_row(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> bool:
    return all(_same(mine.get(k), theirs.get(k)) for k in _ROW_KEYS)


def _same(a: Any, b: Any) -> bool:
    """Equal, a float up to its round trip through JSON (None and NaN alike: not measured)."""
    if isinstance(a, bool) or isinstance(b, bool) or not (_number(a) and _number(b)):
        return (_missing(a) and _missing(b)) or a == b
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12) or (
        math.isnan(float(a)) and math.isnan(float(b))
    )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))
