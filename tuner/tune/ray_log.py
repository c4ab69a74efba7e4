"""Ray's own lines off the console: what Ray's driver threads print (the raylet's "worker died"
paragraphs, the workers' forwarded output), what its C++ core writes to the process's stderr
(``[mutex.cc : 452] RAW: Lock blocking``) and what its Python loggers say in the driver (Tune's
"may be a performance bottleneck" after each slow tracker callback, "Trials did not
complete") go to :data:`RAY_LOG_FILE` in the experiment folder, named once on the console;
``--verbose`` leaves them on the console.

Ray prints them with ``print`` on ``sys.stdout``/``sys.stderr`` from its own threads (named
below), and its C++ writes to file descriptor 2: the threads are told apart by name, the C++
lines by moving descriptor 2 to the file while Python's ``sys.stderr`` keeps the console. Its
loggers' console handlers write to whatever ``sys.stderr`` is at each record, from the main
thread too, so they are pointed at the file for the block.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from tuner.experiment import RAY_LOG_FILE
from tuner.tune._ray_internals import DRIVER_PRINT_THREADS

__all__ = ["RAY_LOG_FILE", "ray_lines_to_file"]


class _ByThread:
    """A console stream whose writes from Ray's printing threads go to ``log`` instead."""

    def __init__(self, console: TextIO, log: TextIO) -> None:
        self._console = console
        self._log = log

    def write(self, text: str) -> int:
        if threading.current_thread().name in DRIVER_PRINT_THREADS:
            self._log.write(text)
            self._log.flush()
            return len(text)
        return self._console.write(text)

    def flush(self) -> None:
        self._console.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding: the console's
        return getattr(self._console, name)


@contextlib.contextmanager
def ray_lines_to_file(folder: Path, *, verbose: bool) -> Iterator[None]:
    """Within the block, Ray's own lines go to ``folder/ray.log`` (said in one line), unless
    ``verbose``; the console streams are put back after."""
    if verbose:
        yield
        return
    path = folder / RAY_LOG_FILE
    print(f"Ray's own messages go to {path} (--verbose shows them here).", flush=True)
    with open(path, "a", buffering=1) as log, _stderr_fd_to(log), _ray_loggers_to(log):
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _ByThread(sys.stdout, log), _ByThread(sys.stderr, log)  # type: ignore[assignment]
        try:
            yield
        finally:
            sys.stdout, sys.stderr = saved


@contextlib.contextmanager
def _ray_loggers_to(log: TextIO) -> Iterator[None]:
    """Within the block, what Ray's own loggers say goes to ``log``: the console handlers of
    those that have one (``ray``, and ``ray.data`` which does not propagate) write there, and
    so does the last-resort handler for ``ray.*`` records, because ``ray.init`` leaves the
    ``ray`` logger without handlers: its token-authentication warning and Tune's "may be a
    performance bottleneck" then reach the console through Python's last resort. Their file
    handlers stay, and every other logger's record goes where it went."""
    to_log = logging.StreamHandler(log)
    to_log.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    saved: dict[logging.Logger, list[logging.Handler]] = {}
    for logger in _ray_loggers():
        saved[logger] = logger.handlers[:]
        logger.handlers = [to_log if _to_console(h) else h for h in logger.handlers]
    last_resort = logging.lastResort
    logging.lastResort = _RayRecordsTo(to_log, last_resort)
    try:
        yield
    finally:
        logging.lastResort = last_resort
        for logger, handlers in saved.items():
            logger.handlers = handlers


class _RayRecordsTo(logging.Handler):
    """Python's last-resort handler that sends Ray's records to ``ray_log`` instead."""

    def __init__(self, ray_log: logging.Handler, other: logging.Handler | None) -> None:
        super().__init__(other.level if other is not None else logging.WARNING)
        self.ray_log, self.other = ray_log, other

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "ray" or record.name.startswith("ray."):
            self.ray_log.handle(record)
        elif self.other is not None:
            self.other.handle(record)


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
    """File descriptor 2 (what C++ writes to) into ``log`` for the block, while ``sys.stderr``
    writes to the console through a copy of the descriptor. Where ``sys.stderr`` is not that
    descriptor (a test's captured stream, a notebook's), it is left as it is."""
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
