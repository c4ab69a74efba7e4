"""The GPU suite (issue 13): run one stage, several, or all, each into its own folder.

python -m bench.gpu_suite --list                      # the stages, in order, with estimates
python -m bench.gpu_suite ladder                      # one stage on the GPU (about 8 min)
python -m bench.gpu_suite all --dry-run               # every stage on the CPU, tiny (< 3 min)
python -m bench.gpu_suite --plan 1 --archive A.tgz    # the GPU plan's first command (9 min)

Run from the project root (the folder holding bench/ and tuner/).

On a GPU each stage writes reports/examples/gpu-<device>/<stage>/ (the dry run writes
reports/gpu-suite-dry-run/<stage>/); --out ROOT puts the stage folders under ROOT instead.
bench/README.md lists the device commands. The exit status is 0 when every stage's checks passed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from tuner.errors import TunerError
from tuner.units import parse_memory_size

MIN_STAGE_S = 30  # a stage given less is skipped (and said so), not started to be cut


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.dry_run:
        # One thread (here and in the stages' subprocesses): tiny models gain nothing from more,
        # and on a shared machine two spinning OpenMP threads can make a step 100x slower.
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    from bench.gpu_suite import _stages as gpu_suite  # after the threads are set: loads torch

    if args.list:
        for s in gpu_suite.STAGES:
            print(f"{s.name:11s} ~{s.estimate_min:.0f} min on an H100  {s.summary}")
        return 0
    try:
        root = args.out or gpu_suite.default_root(dry_run=args.dry_run)
        records = []
        started = time.monotonic()
        for step in _steps(args, gpu_suite):
            # The dry run checks mechanics on a slow CPU: the plan's shares are a GPU's. On a
            # GPU a stage gets its share, or what --budget-s has left; too little: skipped.
            budget_s = args.budget_s or (gpu_suite.PLAN_COMMAND_S if args.plan else float("inf"))
            left = budget_s - gpu_suite.PLAN_OVERHEAD_S - (time.monotonic() - started)
            limit = args.time_limit if args.dry_run else min(step.time_limit_s, left)
            if limit < MIN_STAGE_S:
                _log(f"{step.stage} skipped: {max(left, 0):.0f} s of --budget-s left")
                continue
            given = {k: v for k, v in _options(args).items() if v is not None}
            records.append(
                gpu_suite.run_stage(
                    step.stage,
                    root=root,
                    dry_run=args.dry_run,
                    options={**step.options, **given},
                    time_limit_s=limit,
                    log=_log,
                )
            )
            if args.archive:  # what finished so far, should the command be cut
                gpu_suite.write_archive(root, args.archive, log=_log)
    except TunerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for r in records:
        status = "ok  " if r["ok"] else "FAIL"
        print(f"{status} {r['stage']:11s} {r['seconds']:7.1f} s  {r['summary']}")
    print(f"results: {root}")
    return 0 if all(r["ok"] for r in records) else 1


def _steps(args: argparse.Namespace, gpu_suite: Any) -> list[Any]:
    """The stages to run: plan ``--plan``'s, else the named ones, each with ``--time-limit``."""
    if args.plan is not None:
        if args.stages:
            raise TunerError("give either stage names or --plan, not both.")
        return list(gpu_suite.plan_steps(args.plan))
    names = gpu_suite.stage_names(args.stages or ["all"])
    return [gpu_suite.PlanStep(name, args.time_limit, {}) for name in names]


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """What the command line passes on to the stages (None: the stage's or the plan's own)."""
    return {
        "repeats": args.repeats,
        "max_memory": args.max_memory,
        "tests": args.tests,
        "trials": args.trials,
        "min_trials": args.min_trials,
        "search_budget_s": args.search_budget_s,
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="The GPU suite: each stage measures one CUDA path and writes one folder.",
        epilog="Stages: cuda-tests, ladder, recipe, norms, search, fidelity (or all).",
    )
    parser.add_argument("stages", nargs="*", help="stage names, or all (default)")
    parser.add_argument("--dry-run", action="store_true", help="every stage on the CPU, tiny")
    parser.add_argument("--list", action="store_true", help="list the stages and exit")
    parser.add_argument("--out", type=Path, help="root folder of the stage folders")
    parser.add_argument("--repeats", type=int, help="interleaved repeats (default: per stage)")
    parser.add_argument(
        "--max-memory", type=_memory_size, help="search budget, e.g. 12GiB (default: calibrated)"
    )
    parser.add_argument(
        "--time-limit", type=float, default=480, help="seconds of measuring per stage (480)"
    )
    parser.add_argument(
        "--tests", type=Path, help="cuda-tests' test folder (default: this checkout's tests/engine)"
    )
    parser.add_argument(
        "--plan", type=int, help="run the GPU plan's command 1 or 2 (bench/README.md), its stages "
        "with their shares of 9 minutes",
    )  # fmt: skip
    parser.add_argument(
        "--archive", type=Path, help="rewrite this .tgz of the results after each stage"
    )
    parser.add_argument(
        "--budget-s", type=float, help="seconds the device command has, unpacking and packing "
        "included (--plan: 540; else no limit): later stages get what is left, or are skipped",
    )  # fmt: skip
    parser.add_argument("--trials", type=int, help="search: trials to ask for (10; plan 2: 6)")
    parser.add_argument(
        "--min-trials", type=int, help="search: fail with fewer finished (1; plan 2: 4)"
    )
    parser.add_argument(
        "--search-budget-s", type=float, help="search: most seconds of searching (300; plan 2: 240)"
    )
    return parser


def _memory_size(text: str) -> int:
    try:
        return parse_memory_size(text)
    except TunerError as exc:  # argparse prints ArgumentTypeError as one usage line
        raise argparse.ArgumentTypeError(str(exc)) from None


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
