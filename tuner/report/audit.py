"""The auditor: every claim of an experiment's report and of every client, checked against the
trial data (``python -m tuner report --check EXPERIMENT``; the tests run it on every experiment
they build).

It reads the experiment folder (its trials, its metadata's measurement clocks), its report
(report.md, the points each plot drew, kept in report.html; trials.csv), the console summary
when one is given, and every tracker's files present (TensorBoard event files in the trial
folders, the MLflow store the search was told, W&B offline runs), and checks:

- ``interval``: every verdict word inside a record's words; in a report its records do not
  cover (older, an ablation's), each against its interval by the one rule
  (:attr:`tuner.stats.Change.verdict`), read from the words;
- ``duration``: every stated duration inside a clock record's words (each record a ``claim``);
  the probe seconds (each trial's, the console's, the metadata's pool) its probe runs' wall
  time as the trials' phase logs have it;
- ``kind``: each trials table row's kind, and the report's trials.csv, against the experiment's;
- ``plot``: every trial in the plots present and told apart, every title count the marks drawn;
- ``tracker``: every tracker's run of each trial ended, with its kind;
- ``unmeasured``: no value that was not measured;
- ``claim``: every record of claims.json (:mod:`tuner.report.claims`) against the data it
  rests on (built again from the experiment, each interval recomputed by the one rule), its
  words its renderer's, said in report.md and report.html; a record of every claim the report
  makes (made again in memory: a deleted record is named) and of every trial cut short;
- ``target``: every trial's time to target in trials.csv against its own accuracy curve and the
  answer (the target, images to target, the stopwatch's and the estimated seconds).

A report folder without its experiment (``reports/examples/...``) is checked against its own
trials.csv (no trackers, no clocks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tuner.errors import TunerError
from tuner.experiment import (
    CLAIMS_FILE,
    METADATA_FILE,
    REPORT_FILE,
    REPORT_HTML_FILE,
    Experiment,
    load_experiment,
    read_metadata,
    read_trials_csv,
)
from tuner.record import KIND, KINDS
from tuner.report._audit_claims import (
    CLAIM,
    check_claims,
    check_claims_kept,
    check_console_claims,
    check_counts_record,
    check_starved_by,
    check_verdict_words,
    claims_of,
    covers_every_section,
    report_documents,
)
from tuner.report._audit_clients import check_plots, check_trackers, check_unmeasured
from tuner.report._audit_probes import check_console_probes, check_probe_seconds
from tuner.report._audit_status import check_format, read_format
from tuner.report._audit_target import check_time_to_target
from tuner.report._audit_text import (
    Finding,
    check_intervals,
    check_kinds,
    kinds_of,
    seconds_of,
)
from tuner.report._build_claims import counts_claim
from tuner.report._speed_claims import check_speed_choices
from tuner.report.claims import render
from tuner.units import duration_text

__all__ = ["CHECKS", "Audit", "Finding", "audit", "check_console"]

CHECKS = (
    "interval",
    "duration",
    KIND,
    "plot",
    "tracker",
    "unmeasured",
    "target",
    CLAIM,
)


@dataclass
class Audit:
    """What the auditor found: the failing claims, and what it could not check (notes)."""

    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    path: Path | None = None  # the folder checked: an experiment's, or a report's alone

    @property
    def ok(self) -> bool:
        return not self.findings

    def lines(self) -> list[str]:
        return [finding.line() for finding in self.findings]


def audit(path: Path, *, report_dir: Path | None = None, console: str | None = None) -> Audit:
    """Check every claim about the experiment (or the report folder) at ``path``.

    Args:
        path: an experiment folder, or a report folder (report.md and trials.csv) alone.
        report_dir: the experiment's report folder (None: ``path`` itself when it is a report,
            else no report is checked).
        console: the console output of the search, when it was kept.

    Raises:
        TunerError: ``path`` is neither an experiment nor a report folder.
    """
    path = Path(path)
    result = Audit(path=path)
    is_experiment = (path / METADATA_FILE).is_file() or any(path.glob("*/params.json"))
    if not is_experiment:
        result.findings += _report_alone(report_dir or path, result)
        return result
    experiment = load_experiment(path)
    result.notes += experiment.problem_lines()  # what it could not read, it did not check
    trials = experiment.trials
    metadata = read_metadata(path) or {}
    if report_dir is not None and (report_dir / "trials.csv").is_file():
        trials = read_trials_csv(report_dir / "trials.csv")  # what the report was made from
        result.findings += _same_rows(experiment.trials, trials, report_dir)
        result.findings += _report(report_dir, trials)
        result.findings += _claims(report_dir, experiment, result)
        where = f"{report_dir.name}/trials.csv"
        result.findings += check_time_to_target(experiment, trials, where)
    else:
        result.findings += check_unmeasured(trials, "the experiment's trials")
    result.findings += check_probe_seconds(path, trials, metadata, "trials.csv")
    options = metadata.get("options") or {}
    found, notes = check_trackers(path, trials, options.get("mlflow"))
    result.findings += found
    result.notes += notes
    if console is not None:
        result.findings += check_console(console, trials)
        result.findings += check_console_probes(console, trials, metadata)
        records = claims_of(report_dir)[0] if report_dir is not None else None
        result.findings += check_console_claims(records or [], console)
    return result


def _report(report_dir: Path, trials: pd.DataFrame) -> list[Finding]:
    found: list[Finding] = []
    markdown = report_dir / REPORT_FILE
    if markdown.is_file():
        text, where = markdown.read_text(), REPORT_FILE
        version = read_format(report_dir / CLAIMS_FILE)
        if not covers_every_section(claims_of(report_dir)[0] or [], version):  # no records
            found += check_intervals(text, where)
        found += check_kinds(text, where, trials)
    page = report_dir / REPORT_HTML_FILE
    if page.is_file():
        found += check_plots(page.read_text(), REPORT_HTML_FILE, trials)
    found += check_unmeasured(trials, f"{report_dir.name}/trials.csv")
    return found


def _report_alone(folder: Path, result: Audit) -> list[Finding]:
    """A report folder without its experiment: its report against its own trials.csv, and the
    intervals of any other report in it (an ablation's, a benchmark's)."""
    if not any(folder.glob("*.md")):
        raise TunerError(f"{folder}: no report (*.md) and no experiment to check.")
    found: list[Finding] = []
    if (folder / "trials.csv").is_file():
        found += _report(folder, read_trials_csv(folder / "trials.csv"))
    if (folder / REPORT_FILE).is_file():
        found += _claims(folder, None, result)
    for other in sorted(set(folder.glob("*.md")) - {folder / REPORT_FILE}):
        found += check_intervals(other.read_text(), other.name)
    return found


def _claims(report_dir: Path, experiment: Experiment | None, result: Audit) -> list[Finding]:
    """The report's records (claims.json) against its data and its words; a report from before
    the records is checked by its words alone (the other checks)."""
    claims, found = claims_of(report_dir)
    if claims is None:
        result.notes.append(f"{report_dir.name}: no {CLAIMS_FILE}: its words checked alone")
        return []
    version = read_format(report_dir / CLAIMS_FILE)  # its records cover every section
    if experiment is not None:
        found += check_claims_kept(claims, experiment, version)
    else:  # nothing to make the claims again from: what is missing is found by its words
        result.notes.append(
            f"{report_dir.name}: a report alone: its {CLAIMS_FILE} records checked as written "
            "(a record it lacks is found with its experiment, and by trials.csv's starved_by)"
        )
    documents = report_documents(report_dir)
    found += check_format(claims, version)
    found += check_verdict_words(documents[REPORT_FILE], claims, version=version)
    if (report_dir / "trials.csv").is_file():
        rows = read_trials_csv(report_dir / "trials.csv")
        found += check_starved_by(claims, rows, f"{report_dir.name}/trials.csv")
        found += check_counts_record(claims, rows, f"{report_dir.name}/trials.csv")
        speed, notes = check_speed_choices(
            claims, rows, f"{report_dir.name}/trials.csv", experiment
        )
        found += speed
        result.notes += notes
    return found + check_claims(claims, documents, experiment)


def _same_rows(experiment: pd.DataFrame, report: pd.DataFrame, report_dir: Path) -> list[Finding]:
    """The report's trials.csv holds the experiment's trials, each with its kind."""
    mine, theirs = kinds_of(experiment), kinds_of(report)
    if mine == theirs:
        return []
    why = f"the experiment folder has {render(counts_claim(experiment))}"
    return [Finding(KIND, f"{report_dir.name}/trials.csv", render(counts_claim(report)), why)]


_LINE = re.compile(rf"^\[[^\]]*\] ({'|'.join(map(re.escape, KINDS))})\s+(\w+)  ", re.MULTILINE)


def check_console(console: str, trials: pd.DataFrame) -> list[Finding]:
    """Each console line that ends a trial names the kind trials.csv has; each phase's "took X"
    is no shorter than the clock its own heartbeat lines showed."""
    kinds = kinds_of(trials)
    found = []
    for match in _LINE.finditer(console):
        said, trial_id = match.group(1), match.group(2)
        if trial_id in kinds and kinds[trial_id] != said:
            why = f"trials.csv says {kinds[trial_id]!r}"
            found.append(Finding(KIND, "console", match.group(0), why))
    return found + _console_durations(console)


def _console_durations(console: str) -> list[Finding]:
    found, shown = [], 0.0  # the longest elapsed time a heartbeat showed in this phase
    for line in console.splitlines():
        beat = re.match(r"\s+\.\.\. [^:]+: (\S+?)(?:,|$)", line)
        if beat:
            shown = max(shown, seconds_of(beat.group(1)))
            continue
        took = re.search(r"took (\S+?)(?=[,:;) ]|$)", line)
        if took:
            if seconds_of(took.group(1)) + 1.0 < shown:
                why = f"its heartbeat showed {duration_text(shown)} gone by"
                found.append(Finding("duration", "console", line.strip(), why))
            shown = 0.0
    return found
