"""One driver per experiment folder (two corrupt it: both add trials to the study, both
re-measure on the same cores). The lock is the kernel's ``flock`` on :data:`LOCK_FILE`, released
when its process ends in any way (kill -9 included), so a dead driver's lock is taken over
without a race; the file keeps who holds it, for the refusal line, and goes with its holder.
Readers (``tuner report``) never take it. Why not ``filelock``: docs/architecture.md.
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
    the block ends (a kill -9 leaves the file, but no lock: the kernel releases it)."""
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
    """The lock file, opened and locked; again while the locked file is not the folder's (a
    holder removes it as it lets go)."""
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
    """Whether the exclusive lock was had; retried briefly (``holder`` holds it an instant)."""
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
    """Refuse early, before any other check, when a live driver holds ``folder``."""
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
    """Record the processes this driver started (its local Ray: its descendants but
    ``existing``), for :func:`end_leftovers` after a kill -9; a killed driver's entries that
    could not be ended stay (never overwritten: nothing could end them later)."""
    import psutil

    me = os.getpid()
    kept = [e for e in _recorded(folder) if e.get("driver") != me and _alive(e) is not None]
    helpers = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):  # ended meanwhile: nothing to record
            if child.pid not in existing:
                started, name = child.create_time(), child.name()
                helpers.append({"pid": child.pid, "started": started, "name": name, "driver": me})
    update_metadata(folder, **{HELPERS_KEY: [*kept, *helpers]})


def _recorded(folder: Path) -> list[dict[str, Any]]:
    entries = read_metadata(folder).get(HELPERS_KEY) or []
    return [e for e in entries if isinstance(e, dict)]


def _alive(entry: dict[str, Any]) -> Any:
    """The recorded process, when it still runs (same PID and start time: a reused PID is
    another process; a zombie has ended), else ``None``."""
    import psutil

    with contextlib.suppress(psutil.Error, KeyError, TypeError, ValueError):
        process = psutil.Process(int(entry["pid"]))
        same = abs(process.create_time() - float(entry["started"])) < 0.01
        if same and process.status() != psutil.STATUS_ZOMBIE:
            return process
    return None


def end_leftovers(folder: Path) -> list[str]:
    """End the processes a dead driver of ``folder`` recorded that still run (never a live
    driver's; the lock's holder may call it, as a resume does: what it ends is the killed
    driver's). Ended entries leave the record. Returns what was ended."""
    recorded = _recorded(folder)
    live = holder(folder)
    if live is not None and not _is_me(live):
        return []
    mine = [e for e in recorded if live is not None and e.get("driver") == os.getpid()]
    theirs = [e for e in recorded if e not in mine]
    alive = [(e, p) for e, p in ((e, _alive(e)) for e in theirs) if p is not None]
    if not alive:
        return []  # the usual case: the driver ended and its Ray with it; nothing is written
    left = _end([p for _, p in alive])
    still = [e for e, p in alive if p in left]
    with contextlib.suppress(OSError):  # a read-only copy: the check above repeats harmlessly
        update_metadata(folder, **{HELPERS_KEY: [*still, *mine]})
    return [f"{e['name']} ({e['pid']})" for e, p in alive if p not in left]


def _is_me(info: dict[str, Any]) -> bool:
    return info.get("pid") == os.getpid() and info.get("host") == socket.gethostname()


def _end(processes: list[Any]) -> list[Any]:
    """SIGTERM, 5 s, then SIGKILL (their driver is gone); the processes still alive after."""
    import psutil

    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, left = psutil.wait_procs(processes, timeout=5)
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.kill()
    _, left = psutil.wait_procs(left, timeout=5)
    return left


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
