"""``tuner report``: an experiment folder -> reports/<name>/ (tables, report.md/.html, configs)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.commands import _flags
from tuner.experiment import REPORT_HTML_FILE
from tuner.record import KIND, TRIAL_ID

if TYPE_CHECKING:
    from tuner.answer import Answer
    from tuner.experiment import Experiment


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="write the report of a search (also works on partial or all-failed experiments)",
        description="Read an experiment folder (files only, no Ray) and write trials.csv, "
        "trials.parquet, report.md, a self-contained report.html, plots and the recommended "
        "configs (python -m tuner train --config FILE) into reports/<name>/.",
    )
    parser.add_argument("experiment", help="experiment folder, or its name under --storage")
    _flags.add(parser, "--storage")
    _flags.add(parser, "--out", detail="default: reports/<experiment name>")
    _flags.add(parser, "--json")
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing: check every claim of the report (--out, default reports/<name>) "
        "and of every tracker's files against the trial data; list each failing claim, one a "
        "line, and exit 1 if there is one (EXPERIMENT may also be a report folder alone)",
    )
    parser.add_argument(
        "--console", metavar="FILE", help="with --check: the search's console output, kept"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from tuner.api import report
    from tuner.errors import TunerError

    if args.check:
        return check(args)
    if args.console:
        raise TunerError(
            f"--console {args.console} is read by --check alone; add --check to check the "
            "report's claims against it, or leave --console out."
        )
    done = report(args.experiment, storage=args.storage, out_dir=args.out)
    experiment, answer, written = done.experiment, done.answer, done.report_dir
    for line in experiment.problem_lines():
        print(line, file=sys.stderr)
    print(written / REPORT_HTML_FILE)
    if args.json:
        _flags.print_json(result_json(experiment, answer, written))
    return 0


def check(args: argparse.Namespace) -> int:
    """``--check``: the auditor's failing claims on stdout, one a line; 1 when there is one."""
    from tuner.api import audit
    from tuner.errors import EXIT_OK, EXIT_RUNTIME

    console = _console(args.console) if args.console else None
    found = audit(args.experiment, storage=args.storage, out_dir=args.out, console=console)
    for note in found.notes:
        print(note, file=sys.stderr)
    for line in found.lines():
        print(line)
    if found.ok:
        print(f"every claim checked holds ({found.path})")
    return EXIT_OK if found.ok else EXIT_RUNTIME


def _console(file: str) -> str:
    """The kept console output ``--console`` names, read before anything is checked."""

    from tuner.errors import TunerError

    kept = "the search's console output, kept (e.g. tuner search ... 2>&1 | tee FILE)"
    try:
        return Path(file).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TunerError(f"--console {file} does not exist; give {kept}.") from None
    except OSError as exc:
        why = exc.strerror
        raise TunerError(f"--console {file} cannot be read ({why}); give {kept}.") from None
    except UnicodeDecodeError:
        raise TunerError(f"--console {file} is not text (UTF-8); give {kept}.") from None


def result_json(experiment: Experiment, answer: Answer, report: Path | None) -> dict[str, Any]:
    """A search's result for ``--json`` (``tuner search``, ``tuner report``): its trials
    counted by kind, the answer's picks with their run configs, where the files are."""
    counts = experiment.trials[KIND].value_counts() if len(experiment.trials) else {}
    recommended = answer.recommended
    return {
        "experiment": str(experiment.path),
        "report": None if report is None else str(report / REPORT_HTML_FILE),
        "trials": {str(kind): int(n) for kind, n in dict(counts).items()},
        "answer": answer.headline(),
        "recommended": None if recommended is None else str(recommended[TRIAL_ID]),
        "picks": {metric: _pick(row, answer) for metric, row in _picks(answer).items()},
        "problems": list(experiment.problems),
    }


def _picks(answer: Answer) -> dict[str, Any]:
    """The picks by what they are best at; the rule's pick first (``time_to_target``)."""
    rule = {"time_to_target": answer.recommended} if answer.by_time else {}
    return {**rule, **answer.best}


def _pick(row: Any, answer: Answer) -> dict[str, Any]:
    trial_id = str(row[TRIAL_ID])
    config = answer.configs.get(trial_id)
    values = {metric: row.get(metric) for metric in answer.best}  # the objectives
    return {TRIAL_ID: trial_id, **values, "config": None if config is None else config.to_dict()}
