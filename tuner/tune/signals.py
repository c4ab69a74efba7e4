"""SIGTERM taken as Ctrl-C in the search's driver. SLURM, Kubernetes and systemd stop a job
with SIGTERM; Ray's own handler (set by ``ray.init``) exits mid-fit and Ray's core then aborts
the driver with a native stack dump, the experiment left "running". Here SIGTERM goes the way
SIGINT goes at that moment: inside ``Tuner.fit`` to Tune's handler (trials stopped and saved),
elsewhere as :class:`~tuner.errors.Terminated`, a ``KeyboardInterrupt`` every Ctrl-C path
catches. Only the exit code tells them apart (:func:`interrupted_exit_code`).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from tuner.errors import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated

__all__ = ["interrupted_exit_code", "sigterm_as_ctrl_c"]

_received: list[int] = []  # the SIGTERMs this process took


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """Within the block (entered after ``ray.init``, which sets its own handler), SIGTERM does
    what SIGINT would do now; the handler before it is restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread: an embedding caller keeps its own
        return
    _received.clear()  # an earlier search of this process (a notebook's) was another search
    previous = signal.signal(signal.SIGTERM, _as_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _as_sigint(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not signal.default_int_handler:
        handler(signal.SIGINT, frame)  # Tune's: stops the trials and saves the experiment
        return
    raise Terminated


def interrupted_exit_code() -> int:
    """143 when a SIGTERM stopped this process's search, else 130 (Ctrl-C)."""
    return EXIT_TERMINATED if _received else EXIT_INTERRUPTED
