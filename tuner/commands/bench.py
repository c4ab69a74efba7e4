"""``tuner bench``: the plain loop vs each speed technique added in turn (writes
``reports/benchmarks/engine_{cpu,cuda}.*``); ``--verify``: the engine vs a minimal loop in fresh
processes (``fidelity_{cpu,cuda}.*``).
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from inspect import signature
from pathlib import Path

from tuner import api
from tuner.commands import _flags
from tuner.errors import TunerError
from tuner.techniques import ladder_knobs

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
    _flags.add_config_flag(group, "steps", default=_defaults("steps"))
    _flags.add_config_flag(group, "warmup_steps", default=_defaults("warmup_steps"))
    _flags.add_config_flag(
        group,
        "amp",
        default="the +amp step: the registry's first mode here; --verify: bf16 on a GPU, off on "
        "a CPU",
    )
    _flags.add(group, "--set")
    _flags.add(parser, "--repeats", detail=f"default: {_defaults('repeats')} pairs")
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


def _defaults(name: str) -> str:
    """The API's default of ``name`` for the ladder, then for --verify (tuner.api owns them)."""
    ladder, verify = (signature(f).parameters[name].default for f in (api.bench, api.verify))
    return f"{ladder}; --verify: {verify}"


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
    from tuner.report.bench import bench_markdown, verify_markdown

    sizes = {"steps": getattr(args, "steps", None), "repeats": args.repeats}
    sizes = {key: value for key, value in sizes.items() if value}  # unset: the API's default
    if getattr(args, "warmup_steps", None) is not None:
        sizes["warmup_steps"] = args.warmup_steps
    # Progress lines go to stderr under --json, so stdout's last line is the result.
    log = partial(print, file=sys.stderr) if args.json else print
    out_dir = Path(args.out or api.BENCHMARKS_DIR)
    given = dict(workload=workload, amp=amp, threads=args.threads, out_dir=out_dir, log=log)
    if args.verify:
        report = api.verify(**given, **sizes)
        markdown = verify_markdown(report)
    else:
        report = api.bench(**given, **sizes, skip=skip)
        markdown = bench_markdown(report)
    if args.json:
        _flags.print_json(report)
    else:
        print(markdown)
    return 0
