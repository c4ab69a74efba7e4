"""``tuner ablate``: the controlled technique ladder and BatchNorm vs GroupNorm, repeated."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from tuner.commands import _flags
from tuner.errors import TunerError
from tuner.techniques import ladder_knobs

# The run settings ablate takes as flags (over tuner.workloads.ABLATION of the device).
_RUN_SETTINGS = (
    "model",
    "model_kwargs",
    "data",
    "img_size",
    "batch_size",
    "steps",
    "epochs",
    "warmup_steps",
    "num_workers",
    "device",
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ablate",
        help="controlled ablation: plain -> +amp -> ... -> +compile, BatchNorm vs GroupNorm, "
        "DataParallel vs DDP",
        description="Run the technique ladder, the norm comparison and (on 2 or more GPUs) "
        "DataParallel vs DDP on one workload, each "
        "step repeated with the same seed (interleaved), and write reports/<name>/ablation.*. "
        "Defaults: a tiny hybrid ViT on digits (CPU) or ViT-B/16 at 224 on synthetic data (GPU).",
    )
    group = parser.add_argument_group("run settings (default: the ablation workload per device)")
    for name in _RUN_SETTINGS:
        _flags.add_config_flag(group, name)
    _flags.add_config_flag(group, "amp", default="fp16 on CUDA, else bf16; the +amp step's mode")
    _flags.add(parser, "--repeats", default=3, detail="default: 3")
    parser.add_argument("--groups", default="8,16,32", help="GroupNorm group counts (8,16,32)")
    parser.add_argument(
        "--norm-model",
        help="model for the norm comparison (default: --model; on GPU without --model, "
        "vit_small_r26_s32_224, since ViT-B/16 has no convolutional norm layers)",
    )
    _flags.add(
        parser,
        "--skip",
        detail="of: " + ", ".join((*(k.field for k in ladder_knobs()), "norm", "data_parallel")),
    )
    _flags.add(parser, "--name", default="ablation", detail="default: ablation")
    _flags.add(parser, "--reports-dir")
    _flags.add(parser, "--json")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from tuner.api import ablate
    from tuner.compare.ablation import skippable
    from tuner.report.ablation import terminal_table

    skip = _flags.skip_list(args.skip, valid=skippable())
    given = _flags.run_settings(args)
    amp = given.pop("amp", None)  # the +amp step's mode, not a setting of the workload
    plan, progress = _progress(args.repeats)
    result = ablate(
        name=args.name,
        reports_dir=args.reports_dir,
        repeats=args.repeats,
        amp=amp,
        groups=_groups(args.groups),
        skip=skip,
        norm_model=args.norm_model,
        on_plan=plan,
        on_run=progress,
        **given,
    )
    out, summary = result.report_dir, result.summary
    if not args.json:
        print(terminal_table(summary))
    print(f"report: {out / 'ablation.html'}")
    if args.json:
        records = json.loads(summary.to_json(orient="records"))  # NaN -> null
        _flags.print_json(
            {"report": str(out / "ablation.html"), "summary": records, "left_out": result.left_out}
        )
    return 0


def _groups(text: str) -> list[int]:
    try:
        groups = [int(g) for g in text.split(",") if g.strip()]
    except ValueError:
        raise TunerError(
            f"--groups {text!r} must be comma-separated integers, e.g. 8,16,32."
        ) from None
    if not groups or min(groups) < 1:
        raise TunerError(f"--groups {text!r} needs at least one positive group count.")
    return groups


def _progress(repeats: int) -> tuple[Callable[[Sequence[Any]], None], Any]:
    """The progress lines, ``[done/total] repeat r step: status, images/s``."""
    done, total = itertools.count(1), [0]

    def plan(arms: Sequence[Any]) -> None:
        total[0] = len(arms) * repeats

    def report(repeat: int, step: Any, row: dict[str, Any]) -> None:
        print(
            f"[{next(done)}/{total[0]}] repeat {repeat + 1} {step.name}: {row['status']}, "
            f"{row['images_per_second']:.1f} images/s",
            file=sys.stderr,
            flush=True,
        )

    return plan, report
