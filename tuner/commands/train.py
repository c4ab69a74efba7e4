"""``tuner train``: one measured training run of one configuration, by hand.

Every :class:`~tuner.config.TrainConfig` field is a flag, generated from the dataclass so the two
cannot drift; ``--config FILE`` (JSON) is read first and flags override it. ``--json`` prints the
result as one JSON object on the last line of stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import types
import typing
from typing import Any, Literal, get_args, get_origin

from tuner.config import TrainConfig

__all__ = ["FIELD_HELP", "add_config_flags", "config_from_args", "register", "run"]

FIELD_HELP: dict[str, str] = {
    "model": "timm model name (timm.list_models())",
    "model_kwargs": "JSON object of extra timm.create_model kwargs, e.g. '{\"depth\": 4}'",
    "data": "digits | synthetic | imagefolder:PATH | cifar10:PATH",
    "img_size": "input image side in pixels (data is resized to it)",
    "synthetic_size": "images per epoch for --data synthetic",
    "num_classes": "classifier outputs ('none': taken from the data)",
    "batch_size": "training batch size",
    "num_workers": "DataLoader worker processes",
    "pin_memory": "page-locked host batches (CUDA only)",
    "persistent_workers": "keep DataLoader workers alive across epochs",
    "drop_last": "drop the last incomplete training batch",
    "lr": "peak learning rate (AdamW)",
    "weight_decay": "AdamW weight decay on weight matrices/kernels",
    "warmup_fraction": "fraction of the budget spent in linear lr warm-up before cosine decay",
    "label_smoothing": "cross-entropy label smoothing",
    "grad_clip_norm": "clip the gradient norm to this ('none': no clipping)",
    "fused_adamw": "fused AdamW kernel where available",
    "amp": "mixed precision: off | bf16 | fp16 (fp16 uses a GradScaler; CPU runs bf16)",
    "set_to_none": "zero_grad(set_to_none=True)",
    "non_blocking": "non_blocking host-to-device copies (with --pin-memory)",
    "prefetch": "off | cuda_stream: copy + normalize the next batch on a side CUDA stream",
    "channels_last": "channels-last memory format for model and input",
    "compile": "torch.compile: off | default | max-autotune",
    "norm": "convolutional norm layers: native | batch | group | layer",
    "gn_groups": "groups for --norm group (must divide every layer's channels)",
    "epochs": "stop after this many epochs ('none': no epoch limit)",
    "steps": "stop after this many steps ('none': no step limit)",
    "time_budget_s": "stop after this many training seconds ('none': no time limit)",
    "warmup_steps": "steps excluded from throughput (warm-up and compile)",
    "target_accuracy": "report the training time to reach this val accuracy",
    "eval_every_steps": "evaluate every N steps ('none': at each epoch end)",
    "max_eval_batches": "evaluate on at most N val batches ('none': all)",
    "seed": "random seed",
    "device": "auto | cpu | cuda | cuda:N",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="run one configuration and print its measured result",
        description="Train one configuration of a timm model and print what was measured "
        "(throughput, data wait, peak memory, val accuracy). Every technique is off by default.",
    )
    parser.add_argument("--config", metavar="FILE", help="JSON run settings; flags override it")
    parser.add_argument(
        "--json", action="store_true", help="print the result as one JSON object (last line)"
    )
    add_config_flags(parser)
    parser.set_defaults(run=run)


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per ``TrainConfig`` field (``--batch-size``); unset flags are left out."""
    hints = typing.get_type_hints(TrainConfig)
    defaults = TrainConfig()
    group = parser.add_argument_group("run settings (defaults: the plain loop on digits)")
    for f in dataclasses.fields(TrainConfig):
        default = getattr(defaults, f.name)
        shown = json.dumps(dict(default)) if f.name == "model_kwargs" else default
        kwargs = _flag_kwargs(hints[f.name])
        kwargs["help"] = f"{FIELD_HELP.get(f.name, f.name)} (default: {shown})"
        flag = "--" + f.name.replace("_", "-")
        group.add_argument(flag, dest=f.name, default=argparse.SUPPRESS, **kwargs)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """``--config FILE`` (if given) overridden by every flag that was set.

    Raises:
        TunerError: unreadable file, unknown setting or impossible value.
    """
    from tuner.config import load_config_file, make_config

    base = load_config_file(args.config).to_dict() if getattr(args, "config", None) else {}
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    flags = {k: v for k, v in vars(args).items() if k in names}
    return make_config({**base, **flags})


def run(args: argparse.Namespace) -> int:
    from tuner.engine import train

    config = config_from_args(args)
    result = train(config, progress_bar=not args.json)
    _print_summary(result, file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(result.to_json(), flush=True)
    if not result.ok:
        print(f"error: run {result.status}: {result.error}", file=sys.stderr)
        return 1
    return 0


def _print_summary(result: Any, *, file: Any) -> None:
    def fmt(value: float | None, spec: str) -> str:
        return "n/a" if value is None else format(value, spec)

    cfg = result.config
    lines = [
        f"status            {result.status}" + (f" ({result.error})" if result.error else ""),
        f"model             {cfg.get('model')} on {cfg.get('data')} at {cfg.get('img_size')} px, "
        f"{result.num_parameters or 0:,} params",
        f"device            {result.device} ({result.device_name})",
        f"val accuracy      {fmt(result.val_accuracy, '.4f')}   "
        f"val loss {fmt(result.val_loss, '.4f')}",
        f"images/s          {fmt(result.images_per_second, ',.1f')} over "
        f"{result.measured_steps} steady-state steps",
        f"data wait         {fmt(result.data_wait_fraction, '.1%')} of step time",
        f"peak memory       {fmt((result.peak_memory_bytes or 0) / 2**20, ',.1f')} MiB "
        f"({result.memory_kind})",
        f"steps / epochs    {result.steps} / {result.epochs:.2f} in {result.train_time_s:.1f} s",
        f"effective         {json.dumps(result.effective, sort_keys=True)}",
    ]
    lines += [f"note              {note}" for note in result.notes]
    print("\n".join(lines), file=file, flush=True)


def _flag_kwargs(hint: Any) -> dict[str, Any]:
    args = [a for a in get_args(hint) if a is not type(None)]
    optional = get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1
    base = args[0] if optional else hint
    if get_origin(base) is Literal:
        return {"choices": list(get_args(base))}
    if base is bool:
        return {"action": argparse.BooleanOptionalAction}
    if get_origin(base) is not None or base is dict:  # Mapping[str, Any]
        return {"type": _json_object, "metavar": "JSON"}
    convert = base if base in (int, float, str) else str
    return {
        "type": _optional(convert) if optional else convert,
        "metavar": convert.__name__.upper(),
    }


def _optional(convert: type) -> Any:
    def parse(text: str) -> Any:
        return None if text.lower() == "none" else convert(text)

    parse.__name__ = convert.__name__  # argparse names the type in its error messages
    return parse


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value
