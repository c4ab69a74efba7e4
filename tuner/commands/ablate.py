"""``tuner ablate``: the controlled technique ladder and BatchNorm vs GroupNorm, repeated."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tuner.errors import TunerError
from tuner.techniques import ladder_knobs


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ablate",
        help="controlled ablation: plain -> +amp -> ... -> +compile, and BatchNorm vs GroupNorm",
        description="Run the technique ladder and the norm comparison on one workload, each "
        "step repeated with the same seed (interleaved), and write reports/<name>/ablation.*. "
        "Defaults: a tiny hybrid ViT on digits (CPU) or ViT-B/16 at 224 on synthetic data (GPU).",
    )
    parser.add_argument("--model", help="timm model name (default: per device)")
    parser.add_argument("--model-kwargs", type=json.loads, help="JSON dict for timm.create_model")
    parser.add_argument("--data", help="digits | synthetic | imagefolder:PATH | cifar10:PATH")
    parser.add_argument("--img-size", type=int)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--steps", type=int, help="training steps per run (default: per device)")
    parser.add_argument("--epochs", type=int, help="epochs per run instead of --steps")
    parser.add_argument("--warmup-steps", type=int, help="steps excluded from throughput")
    parser.add_argument("--num-workers", type=int)
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    parser.add_argument("--repeats", type=int, default=3, help="runs per step (default 3)")
    parser.add_argument("--groups", default="8,16,32", help="GroupNorm group counts (8,16,32)")
    parser.add_argument(
        "--norm-model",
        help="model for the norm comparison (default: --model; on GPU without --model, "
        "vit_small_r26_s32_224, since ViT-B/16 has no convolutional norm layers)",
    )
    parser.add_argument("--amp", choices=["bf16", "fp16"], help="default: fp16 on CUDA, else bf16")
    parser.add_argument(
        "--skip",
        default="",
        help=f"comma list of: {', '.join(k.field for k in ladder_knobs())}, norm",
    )
    parser.add_argument("--name", default="ablation", help="report folder name (ablation)")
    parser.add_argument("--out", default="reports", help="reports root (default: reports)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON lines")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from tuner.compare import ablation as ablate
    from tuner.compare import check_repeats

    check_repeats(args.repeats)
    cuda = torch.cuda.is_available() and args.device != "cpu"
    base = ablate.default_config(cuda=cuda).replace(**_overrides(args))
    arms, left_out = ablate.plan_ablation(
        base,
        cuda=cuda,
        amp=args.amp or ("fp16" if cuda else "bf16"),
        groups=_groups(args.groups),
        skip=[s.strip() for s in args.skip.split(",") if s.strip()],
        norm_model=args.norm_model
        or (None if args.model else ablate.default_norm_model(cuda=cuda)),
    )
    for line in left_out:
        print(f"left out: {line}", file=sys.stderr)
    total = len(arms) * args.repeats
    runs = ablate.run_ablation(arms, repeats=args.repeats, on_run=_progress(total))
    summary = ablate.summarize(runs, arms)
    out = ablate.write_ablation(
        summary,
        runs,
        out_dir=Path(args.out) / args.name,
        title=f"Technique ablation: {args.name}",
        about=_about(base, runs, args) + [f"left out on this device: {x}" for x in left_out],
    )
    if args.json:
        print(summary.to_json(orient="records", lines=True))
    else:
        print(ablate.terminal_table(summary))
    print(f"report: {out / 'ablation.html'}")
    return 0


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    given = {
        "model": args.model,
        "model_kwargs": args.model_kwargs,
        "data": args.data,
        "img_size": args.img_size,
        "batch_size": args.batch_size,
        "steps": args.steps,
        "epochs": args.epochs,
        "warmup_steps": args.warmup_steps,
        "num_workers": args.num_workers,
        "device": args.device,
    }
    changes = {k: v for k, v in given.items() if v is not None}
    if args.model and args.model_kwargs is None:
        changes["model_kwargs"] = {}  # the default model's kwargs do not fit another model
    if args.epochs is not None and args.steps is None:
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
    done = [0]

    def report(repeat: int, step: Any, row: dict[str, Any]) -> None:
        done[0] += 1
        print(
            f"[{done[0]}/{total}] repeat {repeat + 1} {step.name}: {row['status']}, "
            f"{row['images_per_second']:.1f} images/s",
            file=sys.stderr,
            flush=True,
        )

    return report


def _about(base: Any, runs: Any, args: argparse.Namespace) -> list[str]:
    import timm
    import torch

    device = f"{runs['device'].iloc[0]} ({runs['device_name'].iloc[0]})" if len(runs) else "?"
    return [
        f"model `{base.model}` {dict(base.model_kwargs) or ''}, data `{base.data}` at "
        f"{base.img_size} px, batch size {base.batch_size}",
        f"budget per run: steps={base.steps}, epochs={base.epochs}; first "
        f"{base.warmup_steps} steps excluded from throughput (warm-up, compile)",
        f"{args.repeats} repeats per step, seed {base.seed}, run round-robin across steps",
        f"device: {device}; torch {torch.__version__}, timm {timm.__version__}",
        f"memory: {runs['memory_kind'].iloc[0] if len(runs) else '?'}",
    ]
