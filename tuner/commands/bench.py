"""``tuner bench``: the plain loop vs each speed technique added in turn (writes
``reports/benchmarks/engine_{cpu,cuda}.*``); ``--verify``: the engine vs a minimal loop in fresh
processes (``fidelity_{cpu,cuda}.*``).
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

from tuner.api import BENCHMARKS_DIR
from tuner.commands import _flags
from tuner.errors import TunerError
from tuner.techniques import ladder_knobs

_REPEATS = {"ladder": 3, "verify": 6}
_LADDER = tuple(k.field for k in ladder_knobs())
# Settings the bench takes from its own flags: a --set of one would be silently overridden.
_OWN_FLAGS = {
    "steps": "--steps",
    "epochs": "--steps",
    "warmup_steps": "--warmup-steps",
    "amp": "--amp",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="benchmark the speed techniques against the plain loop (--verify: engine fidelity)",
        description="Probe the plain fp32 loop and each technique of the ladder added in turn "
        f"({', '.join(_LADDER)}), interleaved and repeated; report "
        "images/s with intervals, paired ratios, peak memory and MFU. On a GPU the workload is "
        "ViT-B/16 at 224 on synthetic data; on CPU a small hybrid ViT. With --verify, time the "
        "same workload with the engine and with a minimal independent PyTorch loop instead, "
        "each run a fresh process, interleaved, and print their ratio with its interval.",
    )
    group = parser.add_argument_group("run settings (default: the bench workload per device)")
    _flags.add_config_flag(group, "steps", default="20; --verify: 50")
    _flags.add_config_flag(group, "warmup_steps", default="5; --verify: 10")
    _flags.add_config_flag(
        group,
        "amp",
        default="the +amp step: the registry's first mode here; --verify: bf16 on a GPU, off on "
        "a CPU",
    )
    _flags.add(group, "--set")
    repeats = f"default: {_REPEATS['ladder']}; --verify: {_REPEATS['verify']} pairs"
    _flags.add(parser, "--repeats", detail=repeats)
    _flags.add(parser, "--skip", detail="of: " + ", ".join(_LADDER))
    parser.add_argument(
        "--verify",
        action="store_true",
        help="fidelity self-check: the engine vs a minimal loop, in fresh processes",
    )
    parser.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="CPU threads per training process (default: torch's choice; 1 resists a busy "
        "machine's contention)",
    )
    _flags.add(parser, "--out", detail="default: reports/benchmarks")
    _flags.add(parser, "--json")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    workload = _flags.parse_sets(args.set) or None
    clash = sorted(set(workload or ()) & set(_OWN_FLAGS))
    if clash:
        key = clash[0]
        raise TunerError(f"--set {key}=...: the bench sets {key} with {_OWN_FLAGS[key]}; use it.")
    skip = tuple(_flags.skip_list(args.skip, valid=_LADDER))
    amp = getattr(args, "amp", None)
    if amp == "off" and not args.verify:
        raise TunerError("--amp off has no +amp step to measure; leave the step out: --skip amp.")
    from tuner import api
    from tuner.report.bench import bench_markdown, verify_markdown

    # Progress lines go to stderr under --json, so stdout's last line is the result.
    log = partial(print, file=sys.stderr) if args.json else print
    out_dir = Path(args.out or BENCHMARKS_DIR)
    if args.verify:
        report = api.verify(
            workload=workload,
            amp=amp,
            steps=getattr(args, "steps", None) or 50,
            warmup_steps=getattr(args, "warmup_steps", 10),
            repeats=args.repeats or _REPEATS["verify"],
            threads=args.threads,
            out_dir=out_dir,
            log=log,
        )
        markdown = verify_markdown(report)
    else:
        report = api.bench(
            workload=workload,
            steps=getattr(args, "steps", None) or 20,
            warmup_steps=getattr(args, "warmup_steps", 5),
            repeats=args.repeats or _REPEATS["ladder"],
            skip=skip,
            amp=amp,
            threads=args.threads,
            out_dir=out_dir,
            log=log,
        )
        markdown = bench_markdown(report)
    if args.json:
        _flags.print_json(report)
    else:
        print(markdown)
    return 0
