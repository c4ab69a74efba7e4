"""One driver per experiment folder: a lock held by a live process, refused to a second one.

Two drivers on one folder corrupt it (both add trials to the study, both re-measure on the same
cores). The lock is the kernel's ``flock`` on :data:`LOCK_FILE`, not the file's existence: it
is released when its process ends in any way (kill -9 and a reboot included), so a dead
driver's lock is taken over safely, without a race between two that try at once. The file
keeps who holds it, for the line that refuses a second driver, and goes when its holder lets go
(a driver that ended leaves no lock file; a killed one's stays, held by no one). Readers
(``tuner report``) never take it. On a network filesystem ``flock`` is as good as its locking
(NFSv4 supports it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tuner.errors import TunerError
from tuner.experiment._files import LOCK_FILE
from tuner.experiment._metadata import read_metadata, update_metadata
from tuner.experiment._read import json_object

__all__ = [
    "LOCK_FILE",
    "ExperimentLocked",
    "child_pids",
    "driver_lock",
    "end_leftovers",
    "holder",
    "record_helpers",
    "refuse_if_held",
    "say_leftovers_ended",
]


class ExperimentLocked(TunerError):
    """Another live process drives this experiment."""


@contextlib.contextmanager
def driver_lock(folder: Path, *, command: str) -> Iterator[None]:
    """Hold the experiment's driver lock for the ``with`` block; its file goes with it, however
    the block ends (a kill -9 leaves the file, but no lock: the kernel releases it).

    Raises:
        ExperimentLocked: a live process holds it; the message names it and what to do.
    """
    folder.mkdir(parents=True, exist_ok=True)
    fd = _locked_fd(folder)
    try:
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        info = dict(host=socket.gethostname(), pid=os.getpid(), command=command, since=since)
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        yield
    finally:
        if _is_file_of(fd, folder / LOCK_FILE):  # removed while held: no one else can hold it
            with contextlib.suppress(OSError):
                (folder / LOCK_FILE).unlink()
        os.close(fd)  # closing releases the flock


def _locked_fd(folder: Path) -> int:
    """The lock file, opened and locked. A holder removes the file as it lets go, so the file
    this process locked may be gone by then: it is opened again until the locked file is the
    one the folder has."""
    while True:
        fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        if not _try_lock(fd):
            os.close(fd)
            raise ExperimentLocked(_refusal(folder))
        if _is_file_of(fd, folder / LOCK_FILE):
            return fd
        os.close(fd)


def _is_file_of(fd: int, path: Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


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
    try:
        fd = os.open(path, os.O_RDONLY)
    except (FileNotFoundError, IsADirectoryError):  # none, or its holder let go this instant
        return None
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


# The metadata's record of the processes a driver started for its local Ray (pid, start time,
# name): what a kill -9 of the driver leaves behind (Ray's agents outlive it, reparented to init).
HELPERS_KEY = "driver_helpers"


def child_pids() -> set[int]:
    """The PIDs of this process's descendants now (what :func:`record_helpers` leaves out)."""
    import psutil

    return {child.pid for child in psutil.Process().children(recursive=True)}


def record_helpers(folder: Path, *, existing: set[int]) -> None:
    """Record the processes this driver started (its local Ray): its descendants but those in
    ``existing`` (:func:`child_pids` before Ray started: an embedding program's, a test
    session's), for :func:`end_leftovers` after a kill -9."""
    import psutil

    helpers = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):  # ended meanwhile: nothing to record
            if child.pid not in existing:
                helpers.append(
                    {"pid": child.pid, "started": child.create_time(), "name": child.name()}
                )
    update_metadata(folder, **{HELPERS_KEY: helpers})


def end_leftovers(folder: Path) -> list[str]:
    """End the processes a dead driver of ``folder`` recorded that still run: each by its PID,
    only when its start time is the recorded one (a reused PID is another process), and only
    when no live driver holds the folder (its helpers are its own). Returns what was ended."""
    recorded = read_metadata(folder).get(HELPERS_KEY) or []
    if not recorded or holder(folder) is not None:
        return []
    import psutil

    alive = []
    for entry in recorded:
        with contextlib.suppress(psutil.Error, KeyError, TypeError):
            process = psutil.Process(int(entry["pid"]))
            same = abs(process.create_time() - float(entry["started"])) < 0.01
            # A zombie has ended (only its exit status waits for a parent that may never reap
            # it, as when init does not): nothing to end.
            if same and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
    if not alive:
        return []  # the usual case: the driver ended and its Ray with it; nothing is written
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, left = psutil.wait_procs(alive, timeout=5)
    for process in left:  # ignored SIGTERM: its driver is gone, nothing of it is needed
        with contextlib.suppress(psutil.Error):
            process.kill()
    with contextlib.suppress(OSError):  # a read-only copy: the check above repeats harmlessly
        update_metadata(folder, **{HELPERS_KEY: []})
    return [f"{entry['name']} ({entry['pid']})" for entry in recorded if _was(entry, alive)]


def _was(entry: dict[str, Any], ended: list[Any]) -> bool:
    return any(process.pid == int(entry["pid"]) for process in ended)


def say_leftovers_ended(folder: Path) -> None:
    """:func:`end_leftovers`, said in one line when it ended any."""
    ended = end_leftovers(folder)
    if ended:
        print(
            f"Ended {len(ended)} process(es) a killed driver of {folder.name!r} left running: "
            f"{', '.join(ended)}.",
            file=sys.stderr,  # a notice: stdout keeps what the command prints (--json)
            flush=True,
        )
