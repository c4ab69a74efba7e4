"""``tuner bench``: the plain loop vs each speed technique added in turn, measured in one run.

Writes ``reports/benchmarks/engine_cpu.{json,md}`` (or ``engine_cuda.*`` on a GPU). The same
code runs as ``python bench/engine_bench.py``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tuner.techniques import ladder_knobs


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="benchmark the speed techniques against the plain loop",
        description="Probe the plain fp32 loop and each technique of the ladder added in turn "
        f"({', '.join(k.field for k in ladder_knobs())}), interleaved and repeated; report "
        "images/s with intervals, paired ratios, peak memory and MFU. On a GPU the workload is "
        "ViT-B/16 at 224 on synthetic data; on CPU a small hybrid ViT.",
    )
    parser.add_argument("--steps", type=int, default=20, help="measured steps per probe")
    parser.add_argument("--warmup-steps", type=int, default=5, help="excluded steps per probe")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats per rung")
    parser.add_argument(
        "--workload", type=json.loads, default=None, metavar="JSON",
        help='run settings that replace the default workload, e.g. \'{"batch_size": 128}\'',
    )  # fmt: skip
    parser.add_argument(
        "--skip", nargs="*", default=[], metavar="KNOB",
        help="ladder knobs to leave out, e.g. compile fused_adamw",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks"), help="output dir")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from tuner.benchmark import run_benchmark, to_markdown

    report = run_benchmark(
        workload=args.workload,
        steps=args.steps,
        warmup_steps=args.warmup_steps,
        repeats=args.repeats,
        skip=tuple(args.skip),
        out_dir=args.out,
    )
    print(to_markdown(report))
    return 0
