"""``tuner bench``: the plain loop vs each speed technique added in turn, measured in one run;
with ``--verify``, the fidelity self-check (the engine vs a minimal loop, in fresh processes).

Writes ``reports/benchmarks/engine_cpu.{json,md}`` (or ``engine_cuda.*`` on a GPU), and with
``--verify`` ``fidelity_cpu.*`` (or ``fidelity_cuda.*``). The same code runs as
``python bench/engine_bench.py``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tuner.techniques import ladder_knobs

_REPEATS = {"ladder": 3, "verify": 6}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="benchmark the speed techniques against the plain loop (--verify: engine fidelity)",
        description="Probe the plain fp32 loop and each technique of the ladder added in turn "
        f"({', '.join(k.field for k in ladder_knobs())}), interleaved and repeated; report "
        "images/s with intervals, paired ratios, peak memory and MFU. On a GPU the workload is "
        "ViT-B/16 at 224 on synthetic data; on CPU a small hybrid ViT. With --verify, time the "
        "same workload with the engine and with a minimal independent PyTorch loop instead, "
        "each run a fresh process, interleaved, and print their ratio with its interval.",
    )
    parser.add_argument("--steps", type=int, help="measured steps per run (20; --verify: 50)")
    parser.add_argument("--warmup-steps", type=int, help="excluded steps per run (5; --verify: 10)")
    parser.add_argument(
        "--repeats",
        type=int,
        help=f"interleaved repeats ({_REPEATS['ladder']}; --verify: {_REPEATS['verify']} pairs)",
    )
    parser.add_argument(
        "--workload", type=json.loads, default=None, metavar="JSON",
        help='run settings that replace the default workload, e.g. \'{"batch_size": 128}\'',
    )  # fmt: skip
    parser.add_argument(
        "--skip", nargs="*", default=[], metavar="KNOB",
        help="ladder knobs to leave out, e.g. compile fused_adamw",
    )  # fmt: skip
    parser.add_argument(
        "--verify",
        action="store_true",
        help="fidelity self-check: the engine vs a minimal loop, in fresh processes",
    )
    parser.add_argument(
        "--amp",
        choices=["off", "bf16"],
        help="--verify's precision (default: bf16 on a GPU, off = fp32 on a CPU)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        help="--verify's CPU threads per process (default: torch's choice; 1 resists a busy "
        "machine's contention)",
    )
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks"), help="output dir")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.verify:
        return _verify(args)
    from tuner.compare.bench import run_benchmark, to_markdown

    report = run_benchmark(
        workload=args.workload,
        steps=args.steps or 20,
        warmup_steps=5 if args.warmup_steps is None else args.warmup_steps,
        repeats=args.repeats or _REPEATS["ladder"],
        skip=tuple(args.skip),
        out_dir=args.out,
    )
    print(to_markdown(report))
    return 0


def _verify(args: argparse.Namespace) -> int:
    import torch

    from tuner.compare.fidelity import run_verify, to_markdown, verify_config

    config = verify_config(cuda=torch.cuda.is_available(), workload=args.workload, amp=args.amp)
    report = run_verify(
        config,
        steps=args.steps or 50,
        warmup_steps=10 if args.warmup_steps is None else args.warmup_steps,
        repeats=args.repeats or _REPEATS["verify"],
        threads=args.threads,
        out_dir=args.out,
    )
    print(to_markdown(report))
    return 0
