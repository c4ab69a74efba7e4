"""``tuner report``: an experiment folder -> reports/<name>/ (tables, report.md/.html, configs)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="write the report of a search (also works on partial or all-failed experiments)",
        description="Read an experiment folder (files only, no Ray) and write trials.csv, "
        "trials.parquet, report.md, a self-contained report.html, plots and the recommended "
        "configs (python -m tuner train --config FILE) into reports/<name>/.",
    )
    parser.add_argument("experiment", help="experiment folder, or its name under --storage")
    parser.add_argument("--storage", default="experiments", help="where named experiments live")
    parser.add_argument("--out", help="report folder (default: reports/<experiment name>)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from tuner.answer import decide
    from tuner.experiment import load_experiment, resolve_experiment
    from tuner.report import write_report

    path = resolve_experiment(args.experiment, storage=args.storage)
    experiment = load_experiment(path)
    out = Path(args.out) if args.out else Path("reports") / path.name
    written = write_report(experiment, decide(experiment), out_dir=out)
    for line in experiment.problem_lines():
        print(line, file=sys.stderr)
    print(written / "report.html")
    return 0
