"""The project's errors: one line for people, a traceback only with ``--debug``.

The exit code tells a script what kind of problem stopped ``tuner``: a usage error (bad flags,
values, spaces or inputs, found before anything runs) exits 2, a runtime error (the cluster was
lost mid-search, a run failed) exits 1. See ``python -m tuner --help`` for every exit code.
"""

from __future__ import annotations

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_RUNTIME",
    "EXIT_USAGE",
    "TunerError",
    "TunerRuntimeError",
    "error_line",
]

EXIT_OK = 0  # finished, with at least one usable trial where the command searches
EXIT_RUNTIME = 1  # finished with nothing usable, or a runtime error stopped it
EXIT_USAGE = 2  # a usage error: nothing ran
EXIT_INTERRUPTED = 130  # Ctrl-C: a search can be resumed


class TunerError(Exception):
    """A problem the user can fix. Its message names what is wrong and how to fix it.

    The CLI prints it as one line (``error: ...``) without a traceback and exits with
    :attr:`exit_code`: a plain ``TunerError`` is a usage error, found before anything ran.
    """

    exit_code = EXIT_USAGE


class TunerRuntimeError(TunerError):
    """A problem that stopped work already under way (e.g. the Ray cluster was lost).

    Its message says what was lost and how to continue (``--resume``); the CLI exits 1.
    """

    exit_code = EXIT_RUNTIME


def error_line(exc: BaseException, *, limit: int = 300) -> str:
    """``Type: message``, its first line cut to ``limit`` characters: a foreign error told in
    a warning line or a record."""
    return f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:limit]
