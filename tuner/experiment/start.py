"""A search's start on its folder, before anything slow: the experiment's name, its paths, the
driver lock (one driver per folder), and on ``--resume`` the experiment's own options, read from
its metadata. The caller's checks run inside the lock (:func:`start_search`'s ``check``): the
tune side's preflight, which this Ray-free layer cannot import. Nothing here imports torch,
pandas or Ray, so a usage error of these answers in about a second.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from tuner.errors import TunerError
from tuner.experiment._files import METADATA_FILE, RAY_LOG_FILE
from tuner.experiment.lock import driver_lock, refuse_if_held, say_leftovers_ended
from tuner.experiment.options import SearchOptions, options_to_resume
from tuner.experiment.paths import ExperimentPaths

__all__ = ["refuse_existing", "said_if_stopped", "start_search"]

Checked = TypeVar("Checked")


@contextlib.contextmanager
def start_search(
    options: SearchOptions,
    *,
    given: frozenset[str] | None = None,
    check: Callable[[SearchOptions, ExperimentPaths, float], Checked],
) -> Iterator[Checked]:
    """Take the experiment's folder for this driver and yield what ``check(options, paths,
    began)`` makes of it: the lock is taken before anything slow and held for the ``with``
    block (the search runs inside it); ``options`` are, on a resume, the experiment's own with
    what ``given`` may change applied (``given``: the fields the caller set; None: those unlike
    the defaults). Ctrl-C or SIGTERM during the checks says in one line that nothing changed
    and how to go on; a new search's folder goes with it.

    Raises:
        TunerError: the first problem found (usage: exit code 2).
    """
    began = time.perf_counter()
    name = options.name or _default_name(options.space)
    paths = ExperimentPaths.of(options.storage, name)
    refuse_if_held(paths.local)  # before anything else: the one line that says who drives it
    if options.resume:  # the metadata alone: an unknown name creates no folder
        options = options_to_resume(paths, options, named=given)
    created = [p for p in (paths.local, *paths.local.parents) if not p.exists()]
    try:
        with driver_lock(paths.local, command=shlex.join(["tuner", *sys.argv[1:]])):
            with said_if_stopped(paths, resume=options.resume):
                if options.resume:
                    say_leftovers_ended(paths.local)
                else:
                    refuse_existing(paths)  # another driver finished one of this name first
                checked = check(dataclasses.replace(options, name=paths.name), paths, began)
            yield checked
    finally:
        # The folders the lock made for a new search that began nothing (a usage error, a stop
        # in its checks or Ray's start: Ray's log of that start goes too); a folder with
        # anything else in it stays.
        if created and not (paths.local / METADATA_FILE).is_file():
            (paths.local / RAY_LOG_FILE).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            for folder in created:
                folder.rmdir()


@contextlib.contextmanager
def said_if_stopped(paths: ExperimentPaths, *, resume: bool) -> Iterator[None]:
    """Ctrl-C or SIGTERM before the search began (its checks, Ray's start): one line saying
    that nothing was kept or changed, and the command that goes on."""
    try:
        yield
    except KeyboardInterrupt:
        if resume:
            line = (
                f"Stopped before {paths.name!r} resumed: it is as it was. "
                f"Continue it with:  {paths.resume_command()}"
            )
        else:
            line = (
                f"Stopped before the search {paths.name!r} started: nothing was kept. "
                "Start it again with the same command."
            )
        print(f"\n{line}", flush=True)
        raise


def _default_name(space: str) -> str:
    """``<space file stem>-<time>``, the stem cut to what --name allows (an odd file name is no
    fault of a --name the user did not give)."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(space).stem).lstrip("_.-") or "search"
    return f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def refuse_existing(paths: ExperimentPaths) -> None:
    if (paths.local / METADATA_FILE).exists():
        raise TunerError(
            f"Experiment {paths.name!r} already exists in {paths.local.parent}; continue it "
            "with --resume or pick another --name."
        )
