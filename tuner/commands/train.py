"""``tuner train``: one measured training run of one configuration, by hand.

Every :class:`~tuner.config.TrainConfig` field is a flag, generated from the dataclass so the two
cannot drift; ``--config FILE`` (JSON) is read first and flags override it. ``--json`` prints the
result as one JSON object on the last line of stdout. Under ``torchrun --nproc-per-node N`` the
run is data-parallel over N workers and only rank 0 prints.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import types
import typing
from typing import Any, Literal, get_args, get_origin

from tuner.config import TrainConfig, config_fields, field_help
from tuner.units import format_bytes

__all__ = [
    "add_config_flag",
    "add_config_flags",
    "config_flag",
    "config_from_args",
    "register",
    "run",
]

_HINTS = typing.get_type_hints(TrainConfig)


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
    defaults = TrainConfig()
    group = parser.add_argument_group("run settings (defaults: the plain loop on digits)")
    for f in dataclasses.fields(TrainConfig):
        default = getattr(defaults, f.name)
        shown = json.dumps(dict(default)) if f.name == "model_kwargs" else default
        add_config_flag(group, f.name, help=f"{field_help(f.name)} (default: {shown})")


def add_config_flag(
    group: argparse._ActionsContainer,
    name: str,
    *,
    help: str | None = None,
) -> None:
    """The flag of one ``TrainConfig`` field, spelled and typed from the field, so every
    command spells a run setting the same way (``img_size`` is ``--img-size``).

    An unset flag is left out of the parsed namespace (``hasattr(args, name)`` is false).
    """
    kwargs = dict(dest=name, default=argparse.SUPPRESS, **_flag_kwargs(_HINTS[name]))
    group.add_argument(config_flag(name), help=field_help(name) if help is None else help, **kwargs)


def config_flag(name: str) -> str:
    """The command-line spelling of a ``TrainConfig`` field: ``img_size`` -> ``--img-size``."""
    return "--" + name.replace("_", "-")


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """``--config FILE`` (if given) overridden by every flag that was set.

    Raises:
        TunerError: unreadable file, unknown setting or impossible value.
    """
    from tuner.config import load_config_file

    base = load_config_file(args.config).to_dict() if getattr(args, "config", None) else {}
    flags = {k: v for k, v in vars(args).items() if k in config_fields()}
    return TrainConfig.from_params({**base, **flags})


def run(args: argparse.Namespace) -> int:
    import torch

    from tuner.engine import launched_group, train

    config = config_from_args(args)
    cuda = config.device != "cpu" and torch.cuda.is_available()
    with launched_group(cuda=cuda) as world:  # torchrun: one worker of a data-parallel run
        result = train(config, progress_bar=not args.json and world.rank == 0)
    if world.rank != 0:  # rank 0's result is the global one: it alone speaks
        return 0 if result.ok else 1
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
        f"val accuracy      {fmt(result.val_accuracy, '.4f')}{_accuracy_interval(result)}   "
        f"val loss {fmt(result.val_loss, '.4f')}",
        f"images/s          {fmt(result.images_per_second, ',.1f')}{_spread(result)} over "
        f"{result.measured_steps} steady-state steps",
        f"data wait         {fmt(result.data_wait_fraction, '.1%')} of step time",
        f"peak memory       {format_bytes(result.peak_memory_bytes)} ({result.memory_kind})",
        f"batch             {cfg.get('batch_size')} per worker x {result.world_size} worker(s) = "
        f"{result.global_batch_size} global, peak lr {result.effective.get('lr', cfg.get('lr')):g}",
        f"steps / epochs    {result.steps} / {result.epochs:.2f} in {result.train_time_s:.1f} s",
        f"effective         {json.dumps(result.effective, sort_keys=True)}",
    ]
    if result.skipped_images:
        lines.append(f"skipped images    {result.skipped_images} unreadable file(s)")
    lines += [f"note              {note}" for note in result.notes]
    print("\n".join(lines), file=file, flush=True)


def _spread(result: Any) -> str:
    low, high = result.images_per_second_low, result.images_per_second_high
    return "" if low is None or high is None else f" [{low:,.1f}-{high:,.1f} over windows]"


def _accuracy_interval(result: Any) -> str:
    from tuner.stats import wilson_interval

    if result.val_accuracy is None or not result.val_images:
        return ""
    low, high = wilson_interval(round(result.val_accuracy * result.val_images), result.val_images)
    return f" [{low:.4f}-{high:.4f}, {result.val_images} images]"


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
