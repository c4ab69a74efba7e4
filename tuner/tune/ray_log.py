"""Ray's own lines off the console, into :data:`RAY_LOG_FILE` (not with ``--verbose``):
its Python loggers' (through standard ``logging``: a handler on the ``ray`` logger, which
``ray.init(configure_logging=True)`` keeps), its driver threads' prints (the raylet's "worker
died", the workers' output: no public setting routes them, so by thread name,
:func:`tuner.tune._ray_internals.driver_prints_to`) and its C++ core's raw lines on descriptor 2.
Why no public setting serves: docs/architecture.md, after the glossary.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from tuner.experiment import RAY_LOG_FILE
from tuner.tune._ray_internals import driver_prints_to

__all__ = ["RAY_LOG_FILE", "ray_lines_to_file"]


@contextlib.contextmanager
def ray_lines_to_file(folder: Path, *, verbose: bool) -> Iterator[None]:
    if verbose:
        yield
        return
    path = folder / RAY_LOG_FILE
    print(f"Ray's own messages go to {path} (--verbose shows them here).", flush=True)
    with (
        open(path, "a", buffering=1) as log,
        _stderr_fd_to(log),
        _ray_loggers_to(log),
        driver_prints_to(log),
    ):
        yield


@contextlib.contextmanager
def _ray_loggers_to(log: TextIO) -> Iterator[None]:
    """A handler on ``ray`` (where every ``ray.*`` record that propagates ends) in place of its
    console handler, and of those of the loggers that do not propagate; file handlers stay."""
    to_log = logging.StreamHandler(log)
    to_log.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    ray = logging.getLogger("ray")
    saved = {logger: logger.handlers[:] for logger in {ray, *_ray_loggers()}}
    for logger in saved:
        logger.handlers = [h for h in logger.handlers if not _to_console(h)]
        if logger is ray or len(logger.handlers) < len(saved[logger]):
            logger.addHandler(to_log)
    try:
        yield
    finally:
        for logger, handlers in saved.items():
            logger.handlers = handlers


def _ray_loggers() -> list[logging.Logger]:
    # A copy of the registry: Ray's threads add loggers.
    known = list(logging.root.manager.loggerDict.items())
    return [
        logger
        for name, logger in known
        if (name == "ray" or name.startswith("ray."))
        and isinstance(logger, logging.Logger)  # not a placeholder of a child's parent
        and logger.handlers
    ]


def _to_console(handler: logging.Handler) -> bool:
    return isinstance(handler, logging.StreamHandler) and not isinstance(
        handler, logging.FileHandler
    )


@contextlib.contextmanager
def _stderr_fd_to(log: TextIO) -> Iterator[None]:
    """Descriptor 2 into ``log``, ``sys.stderr`` to the console through a copy of it: Ray's C++
    core writes abseil's raw lines to descriptor 2 itself (no ``RAY_*`` setting moves them).
    A ``sys.stderr`` on another descriptor (a notebook's) is left as it is."""
    try:
        own = sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        own = False
    if not own:
        yield
        return
    sys.stderr.flush()
    console_fd = os.dup(2)
    saved = sys.stderr
    sys.stderr = open(console_fd, "w", buffering=1, closefd=False)  # noqa: SIM115
    os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(console_fd, 2)
        sys.stderr.close()
        os.close(console_fd)
        sys.stderr = saved
