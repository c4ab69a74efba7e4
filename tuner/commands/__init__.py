"""``python -m tuner``: one module per subcommand, with ``register(subparsers)`` and ``run(args)``
(which imports torch and ray, so ``--help`` stays fast), each calling :mod:`tuner.api`. A
:class:`TunerError` or a usage mistake is one line; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from tuner import __version__
from tuner.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_TERMINATED,
    EXIT_USAGE,
    MissingPackage,
    Terminated,
    TunerError,
)

__all__ = ["build_parser", "main"]

# Order is the order of the flow, and of ``--help``.
COMMANDS = ("train", "spaces", "search", "report", "ablate", "bench")
EXIT_CODES = """\
exit codes:
  0    finished (search: with at least one usable trial)
  1    finished with no usable trial, or a runtime error (a failed run, a lost Ray cluster,
       a package tuner needs that this Python lacks)
  2    usage error: bad flags, values, space or input; nothing ran
  130  interrupted (Ctrl-C); a search continues with --resume
  143  terminated (SIGTERM, e.g. from SLURM, Kubernetes or systemd): a search stops as on Ctrl-C
"""


class Parser(argparse.ArgumentParser):
    """Usage errors in one line naming where the help is (subcommand parsers too); flags spelled
    whole: ``--time-budget`` must not pass for ``--time-budget-s``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})

    def error(self, message: str) -> NoReturn:
        line = f"{self.prog}: error: {message} (see {self.prog} --help)"
        print(line, file=sys.stderr)
        raise UsageError(line)


class UsageError(SystemExit):
    """argparse's exit on a usage mistake (exit 2), with its one line: ``main`` prints it as the
    JSON document ``--json`` promises, as it does every other error."""

    def __init__(self, line: str) -> None:
        super().__init__(EXIT_USAGE)
        self.line = line


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="tuner",
        description="Measure which training settings and speed techniques make your timm model "
        "train fastest and best on your hardware.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"tuner.commands.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code (:data:`EXIT_CODES`). A declared dependency this
    Python lacks is one line naming it and its fix, exit 1."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        code = _main(arguments)
        sys.stdout.flush()  # a pipe's buffer: a reader gone shows here, not at Python's exit
        return code
    except BrokenPipeError:
        if "--debug" in arguments or not _reader_gone():
            raise  # a broken pipe of something else (Ray, a loader worker): a real error
        return EXIT_RUNTIME
    except ModuleNotFoundError as exc:
        missing = MissingPackage.of(exc)
        if missing is None or "--debug" in arguments:
            raise
        return _failed(argparse.Namespace(json="--json" in arguments), missing)


def _reader_gone() -> bool:
    """Whether whoever read stdout went away (``tuner spaces | head``); if so, stdout goes to
    nowhere (Python's last flush at exit would raise again)."""
    try:
        sys.stdout.flush()
        return False
    except BrokenPipeError:
        pass
    try:
        nowhere = os.open(os.devnull, os.O_WRONLY)
        os.dup2(nowhere, sys.stdout.fileno())
        os.close(nowhere)
    except (OSError, ValueError):  # a stdout with no descriptor (a notebook's, a test's)
        pass
    return True


def _main(arguments: list[str]) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(arguments)
    except UsageError as exc:
        if "--json" in arguments:  # the flags did not parse, so the word itself is the promise
            from tuner.commands._flags import print_json

            print_json({"status": "error", "error": exc.line, "exit_code": EXIT_USAGE})
        raise
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    try:
        return int(args.run(args) or 0)
    except TunerError as exc:
        if args.debug:
            raise
        return _failed(args, exc)
    except Terminated:
        return _ended(args, "terminated (SIGTERM)", status="interrupted", code=EXIT_TERMINATED)
    except KeyboardInterrupt:
        return _ended(args, "interrupted", status="interrupted", code=EXIT_INTERRUPTED)


def _failed(args: argparse.Namespace, exc: TunerError) -> int:
    error = {"error": str(exc)}
    return _ended(args, f"error: {exc}", status="error", code=exc.exit_code, **error)


def _ended(args: argparse.Namespace, line: str, *, status: str, code: int, **more: str) -> int:
    """Print ``line``; with ``--json`` (which promises a JSON document), say the end as one."""
    print(line, file=sys.stderr)
    if getattr(args, "json", False):
        from tuner.commands._flags import print_json

        print_json({"status": status, **more, "exit_code": code})
    return code
