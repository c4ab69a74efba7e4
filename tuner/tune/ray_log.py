"""Ray's own lines off the console: what its Python loggers say in the driver (Tune's "may be a
performance bottleneck" after each slow tracker callback, the token-authentication warning),
what its driver threads print (the raylet's "worker died" paragraphs, the workers' forwarded
output) and what its C++ core writes to the process's stderr (``[mutex.cc : 452] RAW: Lock
blocking``) go to :data:`RAY_LOG_FILE` in the experiment folder, named once on the console;
``--verbose`` leaves them on the console.

Ray's settings do the first: its loggers are standard ``logging`` loggers under ``ray``, which
does not propagate, and ``ray.init(configure_logging=True)`` (tuner.tune.cluster) keeps the
handlers set on it before (``configure_logging=False`` would clear them). No public setting
does the other two (``ray.LoggingConfig`` adds a console handler on the driver's root logger;
``log_to_driver=False`` would drop the workers' lines from ray.log and still print the
raylet's): the driver threads' prints are routed by thread name
(:func:`tuner.tune._ray_internals.driver_prints_to`), the C++ lines by moving descriptor 2.
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
    """Within the block, Ray's own lines go to ``folder/ray.log`` (said in one line), unless
    ``verbose``; the console streams and Ray's loggers are put back after."""
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
    """Within the block, Ray's loggers write to ``log`` instead of the console: a handler on
    ``ray`` (every ``ray.*`` record that propagates ends there) in place of its console
    handler, and in place of those of the loggers that do not propagate (``ray.data``). Their
    file handlers stay; every other logger's record goes where it went."""
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
    """Ray's loggers that have handlers (a copy of the registry: Ray's threads add loggers)."""
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
    """File descriptor 2 into ``log`` for the block, while ``sys.stderr`` writes to the console
    through a copy of the descriptor. Ray's C++ core writes abseil's raw lines (``RAW:``)
    to descriptor 2 itself: no ``RAY_*`` setting sends them elsewhere
    (``RAY_BACKEND_LOG_LEVEL`` and ``RAY_LOG_TO_STDERR`` govern its ``RAY_LOG`` lines only,
    which go to Ray's session files by default). Where ``sys.stderr`` is not that descriptor
    (a test's captured stream, a notebook's), it is left as it is."""
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
