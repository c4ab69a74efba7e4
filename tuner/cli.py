"""``python -m tuner``: one subcommand per stage of the flow, each in ``tuner/commands/``.

Command modules import heavy libraries (torch, ray) inside ``run`` so ``--help`` stays fast.
A :class:`TunerError` prints as one line; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from tuner.errors import TunerError

__all__ = ["main"]

# Order is the order of the flow, and of ``--help``.
COMMANDS = ("train", "spaces", "search", "report", "ablate", "bench")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tuner",
        description="Measure which training settings and speed techniques make your timm model "
        "train fastest and best on your hardware.",
    )
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"tuner.commands.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except TunerError as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
