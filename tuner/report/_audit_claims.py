"""The auditor's check of the report's records (:mod:`tuner.report.claims`, ``claims.json``):

- each record against the data: built again from the experiment folder (the answer decided on
  its trials and re-measurements, its effects, its probe cache), and each interval it rests on
  recomputed from the rows by the one rule (:attr:`tuner.stats.Change.verdict`);
- each record's words: ``render(record)``, and said where the report says it (report.md,
  report.html, the console when it is kept).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.answer import Answer, decide
from tuner.compare import PLAIN, PLAIN_LOADER
from tuner.decision import accuracy_test, throughput_ratio
from tuner.experiment import CLAIMS_FILE, REPORT_FILE, REPORT_HTML_FILE, Experiment
from tuner.record import STARVED_BY, TRIAL_ID
from tuner.report import _status_words
from tuner.report._audit_text import Finding
from tuner.report._batch import larger_sooner
from tuner.report._batch_words import TIME_RATIO as BATCH_TIME_RATIO
from tuner.report._build_claims import claims_for, counts_claim, short_trials, wall_time_words
from tuner.report._effects import controlled_effects, plain_loop_gain
from tuner.report._trial_words import wall_time_problem, words_as_recorded
from tuner.report._write import placed_claims
from tuner.report.claims import (
    CELL_KINDS,
    CSV_KINDS,
    FORMAT,
    RENDERERS,
    SINCE_FORMAT_1,
    Claim,
    Measure,
    as_json,
    read_claims,
    render,
)
from tuner.report.document import inline_html, md_escape, md_text
from tuner.speed.rule import probe_change
from tuner.stats import Change

__all__ = [
    "CLAIM",
    "CONSOLE_KINDS",
    "check_claims",
    "check_claims_kept",
    "check_console_claims",
    "check_counts_record",
    "check_starved_by",
    "check_verdict_words",
    "claims_of",
    "covers_every_section",
    "report_documents",
]

CLAIM = "claim"  # the check's name in a finding
# The words that claim a verdict: each must lie in a claim's words on the first screen.
VERDICT_WORDS = ("faster", "slower", "beyond noise", "best", "most accurate", "fastest")
_VERDICT = re.compile(r"\b(?:" + "|".join(map(re.escape, VERDICT_WORDS)) + r")\b", re.IGNORECASE)
# The sections whose every verdict word must lie in a claim's words (by their titles' start) in
# a report from before the clock's records (CLOCK_KINDS); in one since, every section.
CHECKED_SECTIONS = (
    "The answer",
    "Pareto front",
    "What each technique does",
    "Input pipeline",
    "Speed settings chosen",
    "Batch size and time to target",
)
# The records of the report's clock; a duration as duration_text writes it.
CLOCK_KINDS = frozenset({"phase_time", "wall_time", "probe_budget", "machine_load"})
_DURATION = re.compile(r"\b(?:\d+h\d\dm|\d+m\d\ds|\d+s)\b")
# The claims the console summary says too (tuner.report.console: its counts line, the lead
# and the sentence).
CONSOLE_KINDS = frozenset({"counts", "picks", "one_pick", "accuracy_against_pick", "starved"})
CONSOLE_KINDS |= _status_words.CONSOLE_KINDS  # what did not finish, said in its records' words


def claims_of(report_dir: Path) -> tuple[list[Claim] | None, list[Finding]]:
    """The records a report wrote (None: it wrote none, a report from before claims.json)."""
    path = report_dir / CLAIMS_FILE
    if not path.is_file():
        return None, []
    try:
        return read_claims(path), []
    except ValueError as error:  # json.JSONDecodeError is one
        return [], [Finding(CLAIM, CLAIMS_FILE, CLAIMS_FILE, f"it does not parse: {error}")]


def check_claims(
    claims: list[Claim],
    documents: Mapping[str, str],
    experiment: Experiment | None,
) -> list[Finding]:
    """Each record's words are its renderer's and are said in each document (``documents``:
    name -> text; report.md always); with the experiment, each record is what its data gives.
    """
    found: list[Finding] = []
    expected = _Expected(experiment) if experiment is not None else None
    for claim in claims:
        problems = [_words(claim, documents), expected.problem(claim) if expected else ""]
        found += [Finding(CLAIM, CLAIMS_FILE, claim.name(), why) for why in problems if why]
    return found


def check_claims_kept(
    claims: list[Claim], experiment: Experiment, version: int | None = FORMAT
) -> list[Finding]:
    """claims.json holds a record of every claim the report makes, and no other: the report's
    claims made again in memory from the experiment (the same claims and the same sections that
    place them as :func:`tuner.report._write.write_report`), compared by kind and subjects (a
    deleted record, or one of a claim the report does not make, is found naming it; a report
    without a ``version``, written before the kinds of :data:`SINCE_FORMAT_1`, lacks those)."""
    made = placed_claims(experiment, decide(experiment))
    recorded = {claim.key for claim in claims}
    if version is None:
        recorded |= {key for key in made.placed if key[0] in SINCE_FORMAT_1}
    found = [
        Finding(CLAIM, CLAIMS_FILE, claim.name(), f"the report makes it ({_cut(claim.text)!r}), "
                f"{CLAIMS_FILE} has no record of it")
        for key, claim in made.placed.items()
        if key not in recorded
    ]  # fmt: skip
    found += [  # one the data gives no claim of at all: check_claims says so
        Finding(CLAIM, CLAIMS_FILE, claim.name(), "the data gives it, the report does not make it")
        for claim in claims
        if claim.key in made.all and claim.key not in made.placed
    ]
    return found


def _cut(text: str, most: int = 80) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


# An interval the interval check (check_intervals) judges by the one rule, e.g. "1.22x [1.09–1.37]"
# or "5.2 points [-7.4–17.7]", with no sentence end between it and the verdict after it.
_BESIDE_INTERVAL = re.compile(r"\[[-−]?[\d.,]+–[-−]?[\d.,]+\](?:(?!\. |;)[^\n])*$")


def check_verdict_words(
    markdown: str, claims: list[Claim], *, version: int | None = None
) -> list[Finding]:
    """Every verdict word (:data:`VERDICT_WORDS`) of report.md's lead and of the sections of
    :data:`CHECKED_SECTIONS` lies in the words of a claim, whose record the data supports; a
    word said outside every claim is a verdict nothing checks. In a report its records cover
    (:func:`covers_every_section`), every section's, and every duration it states. A value
    shown is no claim: a code span (a trial id, a name), a later section's table row.
    ``version``: the format claims.json says it is in (tuner.report._audit_status)."""
    clocked = covers_every_section(claims, version)
    found = []
    for region, values in _checked_regions(markdown, every=clocked):
        spans = [
            (m.start(), m.end())
            for claim in claims
            for form in _forms(claim.kind, claim.text, REPORT_FILE)
            if form
            for m in re.finditer(re.escape(form), region)
        ]
        said = [(w, "interval", "a verdict") for w in _VERDICT.finditer(region)]
        said += [(w, "duration", "a duration") for w in _DURATION.finditer(region) if clocked]
        for word, check, what in said:
            before = region[max(0, word.start() - 90) : word.start()]
            if check == "interval" and not clocked and _BESIDE_INTERVAL.search(before):
                continue  # said after its own interval: the interval check reads it (old)
            if not any(a <= word.start() and word.end() <= b for a, b in [*spans, *values]):
                text = region[max(0, word.start() - 70) : word.end() + 50].replace("\n", " ")
                why = f"{word[0]!r} lies in no claim's words ({CLAIMS_FILE}): {what} unchecked"
                found.append(Finding(check, REPORT_FILE, text, why))
    return found


def covers_every_section(claims: list[Claim], version: int | None = None) -> bool:
    """Whether the records cover every section of their report: claims.json says a format
    (``version``: every report written since it), or, in one written before, it holds the
    clock's records. Then no regex re-reads its words."""
    return version is not None or any(claim.kind in CLOCK_KINDS for claim in claims)


def _checked_regions(markdown: str, *, every: bool) -> list[tuple[str, list[tuple[int, int]]]]:
    """The lead (before the first section, less the title: the experiment's name is the
    user's) and each section whose title is checked (``every``: each section), each with the
    spans that show values: code spans, and a later section's table rows (its errors, settings,
    metadata: the data, not the report's words)."""
    markdown = re.sub(r"\A# .*\n", "", markdown)
    parts = re.split(r"^(?=## \d+\. )", markdown, flags=re.MULTILINE)
    title = re.compile(r"## \d+\. (.*)")
    regions = []
    for part in parts:
        early = not part.startswith("## ") or any(
            (m := title.match(part)) and m[1].startswith(t) for t in CHECKED_SECTIONS
        )
        values = [m.span() for m in re.finditer(r"`[^`\n]*`", part)]
        values += [] if early else [m.span() for m in re.finditer(r"^\|.*$", part, re.MULTILINE)]
        if early or every:
            regions.append((part, values))
    return regions


def check_starved_by(claims: list[Claim], trials: pd.DataFrame, where: str) -> list[Finding]:
    """Every trial's ``starved_by`` in trials.csv (a run cut short of its steps: a starved
    trial, or one of another kind, over budget say) is the cause a starved record gives it, and
    every trial a record names has that cause there."""
    short = short_trials(trials)  # a run the feasibility check stopped was not cut short
    rows = short.set_index(short[TRIAL_ID].astype(str))
    causes = rows[STARVED_BY].dropna().astype(str) if STARVED_BY in rows else pd.Series()
    causes = causes[causes != ""]  # a trial that was not cut short: no cause
    recorded: dict[str, str | None] = {}
    for claim in (c for c in claims if c.kind == "starved"):
        said = claim.words.get("causes", [])
        if len(said) != len(claim.subjects):
            why = f"it names {len(claim.subjects)} trial(s) and {len(said)} cause(s)"
            return [Finding(CLAIM, CLAIMS_FILE, claim.name(), why)]
        recorded |= {t: str(c) if c else None for t, c in zip(claim.subjects, said, strict=True)}
    found = []
    for trial in sorted(set(causes.index) | set(recorded)):
        cause = causes.get(trial)
        if trial in recorded and cause == recorded[trial]:
            continue
        said = f"the records {recorded[trial]!r}" if trial in recorded else "and no record names it"
        why = f"{where} has starved_by {cause!r} for trial {trial}, {said}"
        found.append(Finding(CLAIM, CLAIMS_FILE, f"starved {trial}", why))
    return found


def check_counts_record(claims: list[Claim], trials: pd.DataFrame, where: str) -> list[Finding]:
    """The counts and wall-time records, where the report has them (a report written before
    them has none), against what ``trials`` (the report's trials.csv) gives: a report alone has
    no experiment to build them from (the wall time: its sum)."""
    built = counts_claim(trials)
    seconds = wall_time_words(trials, {})["seconds"]
    found = [
        Finding(CLAIM, CLAIMS_FILE, claim.name(), f"{where} gives {render(built)!r}")
        for claim in claims
        if claim.kind == "counts"
        and (claim.key != built.key or as_json(dict(claim.words)) != as_json(dict(built.words)))
    ]
    return found + [
        Finding(CLAIM, CLAIMS_FILE, claim.name(), f"{where}'s trial_time_s sum to {seconds:.0f}s")
        for claim in claims
        if claim.kind == "wall_time" and abs(float(claim.words["seconds"]) - seconds) > 1.0
    ]


def check_console_claims(claims: list[Claim], console: str) -> list[Finding]:
    """The answer's claims the console summary says (:data:`CONSOLE_KINDS`): its words there."""
    return [
        Finding(CLAIM, "console", claim.name(), f"the console does not say it ({claim.text!r})")
        for claim in claims
        if claim.kind in CONSOLE_KINDS and claim.text not in console
    ]


def _words(claim: Claim, documents: Mapping[str, str]) -> str:
    """Why the record's words are not its own, or not said ("" when they are)."""
    if claim.kind not in RENDERERS:
        return f"no claim kind {claim.kind!r}"
    for measure in claim.measures:
        rule = measure.change.verdict
        if measure.verdict != rule:
            return (
                f"its {measure.quantity} {_interval(measure)} is {rule!r} by the one rule, "
                f"the record says {measure.verdict!r}"
            )
    if claim.kind == "wall_time" and (why := wall_time_problem(claim.words)):
        return why  # the clock it rests on gives another time
    try:
        words = render(claim)
    except (KeyError, ValueError, TypeError, IndexError) as error:
        return f"its record cannot be rendered ({error!r})"
    if claim.text != words:
        return f"its text is not its record's words ({words!r})"
    if claim.kind in CSV_KINDS:  # said in trials.csv alone: checked there (_speed_claims)
        return ""
    for name, text in documents.items():
        if not any(form in text for form in _forms(claim.kind, words, name)):
            return f"{name} does not say it ({words!r})"
    return ""


def _forms(kind: str, words: str, document: str) -> tuple[str, ...]:
    """How a document shows the words: a paragraph's (a claim may open a sentence or a title,
    capitalised), or a whole table cell."""
    if document.endswith(".html"):
        if kind in CELL_KINDS:
            return (f"<td>{html.escape(words)}</td>",)
        return (inline_html(words), inline_html(words[:1].upper() + words[1:]))
    if kind in CELL_KINDS:
        return (f"| {md_escape(words)} |",)
    return (md_text(words), md_text(words[:1].upper() + words[1:]))


def _interval(measure: Measure) -> str:
    return f"{measure.value:.4g} [{measure.low:.4g}, {measure.high:.4g}] over {measure.n}"


class _Expected:
    """The claims the experiment's data gives, and each measure recomputed from the rows."""

    def __init__(self, experiment: Experiment) -> None:
        self.experiment = experiment
        self.answer: Answer = decide(experiment)
        self.effects = controlled_effects(experiment.effects)
        self.claims = claims_for(experiment, self.answer).all

    def problem(self, claim: Claim) -> str:
        built = self.claims.get(claim.key)
        if built is None:
            return "the data gives no such claim (its trials, re-measurements, effects, probes)"
        for measure in claim.measures:
            why = self._measure(measure)
            if why:
                return why
        if built.measures != claim.measures and not _same(built.measures, claim.measures):
            return f"the data gives {[_interval(m) for m in built.measures]}"
        words = words_as_recorded(claim.kind, built.words, claim.words)  # an older record's
        if as_json(words) != as_json(dict(claim.words)):  # NaN is JSON's null
            return f"the data gives {words!r}, the record says {dict(claim.words)!r}"
        return ""

    def _measure(self, measure: Measure) -> str:
        recompute = _RECOMPUTE.get(measure.quantity)
        if recompute is None:
            return f"no quantity {measure.quantity!r}"
        try:
            change = recompute(self, measure.subjects)
        except (KeyError, IndexError, ValueError) as error:
            return f"its {measure.quantity} of {measure.subjects} is not in the data ({error!r})"
        if change is None or not _close(change, measure):
            got = "nothing" if change is None else _interval(Measure.of("", (), change))
            return f"its {measure.quantity} {_interval(measure)}: the data gives {got}"
        return ""

    def _ratio(self, subjects: tuple[str, ...]) -> Change:
        a, b = (self.answer.row(s) for s in subjects)
        return throughput_ratio(a, b, self.experiment.remeasure)

    def _accuracy(self, subjects: tuple[str, ...]) -> Change:
        a, b = (self.answer.row(s) for s in subjects)
        return accuracy_test(a, b)

    def _gain(self, subjects: tuple[str, ...], arm: str = PLAIN) -> Change | None:
        """Over the plain loop, or over the plain input pipeline (``arm``)."""
        gain = plain_loop_gain(self.effects, arm)
        if gain is None:
            return None
        return Change(gain["ratio"], gain["low"], gain["high"], int(gain.get("n") or 0), 1.0)

    def _time(self, subjects: tuple[str, ...]) -> Change | None:
        rule = self.answer.rule
        if rule is None or (rule.pick, rule.versus or "") != subjects:
            return None
        return rule.change

    def _batch_time(self, subjects: tuple[str, ...]) -> Change:
        """A smaller batch's time to target over the larger one's, from the two trials' rows
        and their re-measurements (whether they are the sizes' representatives: the record's
        key, which the data must give too)."""
        small, large = (self.answer.row(s) for s in subjects)
        return larger_sooner(small, large, self.experiment.remeasure)

    def _effect(self, subjects: tuple[str, ...], key: str) -> Change | None:
        rows = (
            self.effects[self.effects["arm"].astype(str) == subjects[0]]
            if len(self.effects)
            else []
        )
        return None if len(rows) == 0 else Change.from_row(rows.iloc[0], key)

    def _effect_ratio(self, subjects: tuple[str, ...]) -> Change | None:
        return self._effect(subjects, "throughput_ratio_vs_reference")

    def _effect_memory(self, subjects: tuple[str, ...]) -> Change | None:
        return self._effect(subjects, "memory_change_bytes_vs_reference")

    def _probe(self, subjects: tuple[str, ...]) -> Change | None:
        knob, key = subjects
        choice = (self.experiment.probe_cache or {})[key]
        variant = next((v for v in choice.get("variants", []) if str(v["name"]) == knob), None)
        return None if variant is None else probe_change(dict(variant))


_RECOMPUTE: dict[str, Callable[[_Expected, tuple[str, ...]], Any]] = {
    "throughput_ratio": _Expected._ratio,
    "accuracy_difference": _Expected._accuracy,
    "plain_loop_gain": _Expected._gain,
    "probe_ratio": _Expected._probe,
    "time_ratio": _Expected._time,
    "effect_ratio": _Expected._effect_ratio,
    "effect_memory": _Expected._effect_memory,
    "loader_gain": lambda expected, subjects: expected._gain(subjects, PLAIN_LOADER),
    BATCH_TIME_RATIO: _Expected._batch_time,
}


def _close(change: Change, measure: Measure) -> bool:
    pairs = [(change.value, measure.value), (change.low, measure.low), (change.high, measure.high)]
    same = all(
        (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
        for a, b in pairs
    )
    return same and change.n == measure.n and change.verdict == measure.verdict


def _same(built: tuple[Measure, ...], recorded: tuple[Measure, ...]) -> bool:
    """The same measures, equal up to float noise (NaN equal to NaN)."""
    return len(built) == len(recorded) and all(
        b.quantity == r.quantity and b.subjects == r.subjects and _close(b.change, r)
        for b, r in zip(built, recorded, strict=True)
    )


def report_documents(report_dir: Path) -> dict[str, str]:
    """The documents the records' words are checked in: report.md (always), report.html."""
    documents = {REPORT_FILE: (report_dir / REPORT_FILE).read_text()}
    page = report_dir / REPORT_HTML_FILE
    if page.is_file():
        documents[REPORT_HTML_FILE] = page.read_text()
    return documents
