"""``tuner ablate``: the controlled technique ladder and BatchNorm vs GroupNorm, repeated."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
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
    import torch

    from tuner.compare import ablation as ablate
    from tuner.compare import check_repeats
    from tuner.report.ablation import terminal_table, write_ablation

    check_repeats(args.repeats)
    skip = _flags.skip_list(args.skip, valid=ablate.skippable())
    given = _flags.run_settings(args)
    cuda = torch.cuda.is_available() and given.get("device", "auto") != "cpu"
    base = ablate.default_config(cuda=cuda).replace(**_overrides(given))
    arms, left_out = ablate.plan_ablation(
        base,
        cuda=cuda,
        amp=given.get("amp") or ("fp16" if cuda else "bf16"),
        groups=_groups(args.groups),
        skip=skip,
        norm_model=args.norm_model
        or (None if "model" in given else ablate.default_norm_model(cuda=cuda)),
        gpus=torch.cuda.device_count(),
    )
    for line in left_out:
        print(f"left out: {line}", file=sys.stderr)
    total = len(arms) * args.repeats
    runs = ablate.run_ablation(arms, repeats=args.repeats, on_run=_progress(total))
    summary = ablate.summarize(runs, arms)
    out = write_ablation(
        summary,
        runs,
        out_dir=Path(args.reports_dir) / args.name,
        title=f"Technique ablation: {args.name}",
        about=_about(base, runs, args) + [f"left out on this device: {x}" for x in left_out],
    )
    if not args.json:
        print(terminal_table(summary))
    print(f"report: {out / 'ablation.html'}")
    if args.json:
        records = json.loads(summary.to_json(orient="records"))  # NaN -> null
        _flags.print_json(
            {"report": str(out / "ablation.html"), "summary": records, "left_out": left_out}
        )
    return 0


def _overrides(given: dict[str, Any]) -> dict[str, Any]:
    """The run-setting flags given, over the device's ablation workload."""
    changes = {k: v for k, v in given.items() if k != "amp"}  # amp is the +amp step's mode
    if "model" in given and "model_kwargs" not in given:
        changes["model_kwargs"] = {}  # the default model's kwargs do not fit another model
    if given.get("epochs") is not None and "steps" not in given:
        changes["steps"] = None  # an epoch budget replaces the default step budget
    return changes


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


def _progress(total: int) -> Any:
    done = itertools.count(1)

    def report(repeat: int, step: Any, row: dict[str, Any]) -> None:
        print(
            f"[{next(done)}/{total}] repeat {repeat + 1} {step.name}: {row['status']}, "
            f"{row['images_per_second']:.1f} images/s",
            file=sys.stderr,
            flush=True,
        )

    return report


def _about(base: Any, runs: Any, args: argparse.Namespace) -> list[str]:
    import timm
    import torch

    from tuner.compare import dp_vs_ddp

    device = f"{runs['device'].iloc[0]} ({runs['device_name'].iloc[0]})" if len(runs) else "?"
    return [
        f"model `{base.model}` {dict(base.model_kwargs) or ''}, data `{base.data}` at "
        f"{base.img_size} px, batch size {base.batch_size}",
        f"budget per run: steps={base.steps}, epochs={base.epochs}; first "
        f"{base.warmup_steps} steps excluded from throughput (warm-up, compile)",
        f"{args.repeats} repeats per step, seed {base.seed}, run round-robin across steps",
        f"device: {device}; torch {torch.__version__}, timm {timm.__version__}",
        f"memory: {runs['memory_kind'].iloc[0] if len(runs) else '?'}",
    ] + (
        [dp_vs_ddp.setup_line(torch.cuda.device_count())]
        if len(runs) and (runs["group"] == dp_vs_ddp.GROUP).any()
        else []
    )
