"""``tuner spaces``: list the search spaces, one line each."""

from __future__ import annotations

import argparse

from tuner.commands import _flags


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "spaces",
        help="list the search spaces (tuner/search_spaces/*.py), one line each",
        description="List the built-in search spaces. `tuner search` also takes a path to "
        "your own .py space file (see tuner/spaces.py for what it must define).",
    )
    _flags.add(parser, "--verbose", detail="also each space's workloads")
    _flags.add(parser, "--json")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from tuner.api import spaces as list_spaces

    spaces = list_spaces()
    if args.json:
        _flags.print_json(
            [{"name": s.name, "summary": s.summary, "workloads": s.workloads} for s in spaces]
        )
        return 0
    width = max(len(space.name) for space in spaces)
    for space in spaces:
        print(f"{space.name:<{width}}  {space.summary}")
        if args.verbose:
            for kind, workload in space.workloads.items():
                described = ", ".join(f"{k}={v}" for k, v in workload.items())
                print(f"{'':<{width}}    {kind}: {described}")
    return 0
