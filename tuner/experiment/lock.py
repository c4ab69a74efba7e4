"""One driver per experiment folder: a lock held by a live process, refused to a second one.

Two drivers on one folder corrupt it (both add trials to the study, both re-measure on the same
cores). The lock is the kernel's ``flock`` on :data:`LOCK_FILE`, not the file's existence: it
is released when its process ends in any way (kill -9 and a reboot included), so a dead
driver's lock is taken over safely, without a race between two that try at once. The file
keeps who holds it, for the line that refuses a second driver. Readers (``tuner report``) never
take it. On a network filesystem ``flock`` is as good as its locking (NFSv4 supports it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tuner.errors import TunerError
from tuner.experiment._files import LOCK_FILE
from tuner.experiment._read import json_object

__all__ = ["LOCK_FILE", "ExperimentLocked", "driver_lock", "holder", "refuse_if_held"]


class ExperimentLocked(TunerError):
    """Another live process drives this experiment."""


@contextlib.contextmanager
def driver_lock(folder: Path, *, command: str) -> Iterator[None]:
    """Hold the experiment's driver lock for the ``with`` block.

    Raises:
        ExperimentLocked: a live process holds it; the message names it and what to do.
    """
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not _try_lock(fd):
            raise ExperimentLocked(_refusal(folder))
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        info = dict(host=socket.gethostname(), pid=os.getpid(), command=command, since=since)
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def _try_lock(fd: int) -> bool:
    """Whether the exclusive lock was had; retried briefly, since a reader's look (``holder``)
    holds a shared lock for an instant."""
    for attempt in range(5):
        if attempt:
            time.sleep(0.2)
        with contextlib.suppress(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
    return False


def holder(folder: Path) -> dict[str, Any] | None:
    """Who holds the lock now (host, pid, command, since), or ``None`` when nobody does."""
    path = folder / LOCK_FILE
    if not path.is_file():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None  # nobody holds it: what the file says is a dead driver's
    except BlockingIOError:
        return json_object(path)  # {}: being written by its holder this instant
    finally:
        os.close(fd)


def refuse_if_held(folder: Path) -> None:
    """Refuse early, before any other check, when a live driver holds ``folder``.

    Raises:
        ExperimentLocked: a live process holds it; the message names it and what to do.
    """
    if holder(folder) is not None:
        raise ExperimentLocked(_refusal(folder))


def _refusal(folder: Path) -> str:
    info = json_object(folder / LOCK_FILE)
    who = f"process {info.get('pid', '?')} on {info.get('host', '?')}"
    since = f" since {info['since']}" if info.get("since") else ""
    command = f" ({info['command']})" if info.get("command") else ""
    return (
        f"Experiment {folder.name!r} is being driven by {who}{since}{command}; a second driver "
        "would corrupt it. Wait for it to finish (`tuner report` reads it meanwhile), or stop "
        "that process and then --resume."
    )
