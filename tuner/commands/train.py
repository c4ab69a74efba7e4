"""``tuner train``: one measured training run of one configuration, by hand; every
``TrainConfig`` field is a flag over ``--config FILE``. Under ``torchrun --nproc-per-node N`` the
run is data-parallel over N workers and only rank 0 prints.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from tuner.commands import _flags
from tuner.config import TrainConfig, load_config_file
from tuner.units import format_bytes

__all__ = ["config_from_args", "register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="run one configuration and print its measured result",
        description="Train one configuration of a timm model and print what was measured "
        "(throughput, data wait, peak memory, val accuracy). Every technique is off by default.",
    )
    parser.add_argument("--config", metavar="FILE", help="JSON run settings; flags override it")
    _flags.add(parser, "--json")
    group = parser.add_argument_group("run settings (defaults: the plain loop on digits)")
    for name, default in TrainConfig().to_dict().items():
        shown = json.dumps(default) if name == "model_kwargs" else str(default)
        _flags.add_config_flag(group, name, default=shown)
    parser.set_defaults(run=run)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """``--config FILE`` (if given) overridden by every flag that was set."""

    base = load_config_file(args.config).to_dict() if args.config else {}
    return TrainConfig.from_params({**base, **_flags.run_settings(args)})


def run(args: argparse.Namespace) -> int:
    from tuner.api import train

    config = config_from_args(args)
    rank = int(os.environ.get("RANK", "0"))  # torchrun's: one worker of a data-parallel run
    result = train(config, progress_bar=not args.json and rank == 0)
    if rank != 0:  # rank 0's result is the global one: it alone speaks
        return 0 if result.ok else 1
    _print_summary(result, file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(result.to_json(), flush=True)  # already JSON text: the last line of stdout
    if not result.ok:
        print(f"error: run {result.status}: {result.error}", file=sys.stderr)
        return 1
    return 0


def _print_summary(result: Any, *, file: Any) -> None:
    from tuner.engine.result import TIME_BUDGET_CUT
    from tuner.stats import wilson_interval

    def fmt(value: float | None, spec: str) -> str:
        return "n/a" if value is None else format(value, spec)

    cfg = result.config
    low, high = result.images_per_second_low, result.images_per_second_high
    spread = "" if low is None or high is None else f" [{low:,.1f}-{high:,.1f} over windows]"
    interval = ""
    if result.val_accuracy is not None and result.val_images:
        n = result.val_images
        acc_low, acc_high = wilson_interval(round(result.val_accuracy * n), n)
        interval = f" [{acc_low:.4f}-{acc_high:.4f}, {n} images]"
    cut = next((note for note in result.notes if note.startswith(TIME_BUDGET_CUT)), None)
    status = f"{result.status}, {cut}" if cut and result.ok else result.status
    lines = [
        f"status            {status}" + (f" ({result.error})" if result.error else ""),
        f"model             {cfg.get('model')} on {cfg.get('data')} at {cfg.get('img_size')} px, "
        f"{result.num_parameters or 0:,} params",
        f"device            {result.device} ({result.device_name})",
        f"val accuracy      {fmt(result.val_accuracy, '.4f')}{interval}   "
        f"val loss {fmt(result.val_loss, '.4f')}",
        f"images/s          {fmt(result.images_per_second, ',.1f')}{spread} over "
        f"{result.measured_steps} steady-state steps",
        f"data wait         {fmt(result.data_wait_fraction, '.1%')} of step time: "
        + _input_pipeline(result),
        f"peak memory       {format_bytes(result.peak_memory_bytes)} ({result.memory_kind})",
        f"batch             {cfg.get('batch_size')} per worker x {result.world_size} worker(s) = "
        f"{result.global_batch_size} global, peak lr "
        f"{fmt(result.effective.get('lr', cfg.get('lr')), 'g')}",
        f"steps / epochs    {result.steps} / {fmt(result.epochs, '.2f')} in "
        f"{fmt(result.train_time_s, '.1f')} s",
        f"effective         {json.dumps(result.effective, sort_keys=True)}",
    ]
    if result.skipped_images:
        lines.append(f"skipped images    {result.skipped_images} unreadable file(s)")
    lines += [f"note              {note}" for note in result.notes if note != cut]
    print("\n".join(lines), file=file, flush=True)


def _input_pipeline(result: Any) -> str:
    """``compute-bound; the loader alone 1,076.2 images/s``, or why there is no verdict."""
    from tuner.engine.meters import LOADER_BATCHES

    if result.data_wait_fraction is None:
        return "not measured (no steady-state step: raise --steps or lower --warmup-steps)"
    if result.bound is None:
        return "no loader (the data lives on the device)"
    alone = result.loader_images_per_second
    loader = (
        f"not measured (fewer than {LOADER_BATCHES + 1} batches, or the run stopped early)"
        if alone is None
        else f"{alone:,.1f} images/s"
    )
    return f"{result.bound}-bound; the loader alone {loader}"
