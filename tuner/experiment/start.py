"""A search's start on its folder, before anything slow: its name and paths, the driver lock,
and on ``--resume`` the experiment's own options. No torch, pandas or Ray: a usage error here
answers in about a second.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import shlex
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tuner.errors import TunerError
from tuner.experiment._files import METADATA_FILE, RAY_LOG_FILE, RAY_STATE_GLOB, STUDY_FILE
from tuner.experiment.lock import driver_lock, refuse_if_held, say_leftovers_ended
from tuner.experiment.options import SearchOptions, options_to_resume
from tuner.experiment.paths import ExperimentPaths, refuse_unwritable

__all__ = ["experiment_paths", "refuse_damaged", "refuse_existing", "start_search"]


def experiment_paths(options: SearchOptions) -> ExperimentPaths:
    """The folder of the search ``options`` describe (``--name``, or the space's and the time)."""
    return ExperimentPaths.of(options.storage, options.name or _default_name(options.space))


@contextlib.contextmanager
def start_search(
    options: SearchOptions, paths: ExperimentPaths, *, given: frozenset[str] | None = None
) -> Iterator[SearchOptions]:
    """Take the folder ``paths`` for this driver (the lock, held for the ``with`` block) and
    yield the options the search runs with: on a resume, the experiment's own, with what
    ``given`` may change applied."""
    refuse_unwritable(paths.local, given=f"--storage {options.storage}")  # no lock there
    refuse_if_held(paths.local)  # before anything else: the one line that says who drives it
    if options.resume:  # the metadata alone: an unknown name creates no folder
        refuse_damaged(paths)  # before Ray starts: one line, not its traceback
        options = options_to_resume(paths.local, options, named=given)
    if not options.no_report:  # written after the trials: a folder it cannot be is found now
        reports = Path(options.reports_dir) / paths.name
        refuse_unwritable(reports, given=f"--reports-dir {options.reports_dir}")
    created = [p for p in (paths.local, *paths.local.parents) if not p.exists()]
    try:
        _make(paths.local, given=f"--storage {options.storage}")
        with driver_lock(paths.local, command=shlex.join(["tuner", *sys.argv[1:]])):
            if options.resume:
                say_leftovers_ended(paths.local)
            else:
                refuse_existing(paths)  # another driver finished one of this name first
            yield dataclasses.replace(options, name=paths.name)
    finally:
        # The folders the lock made for a new search that began nothing (a usage error, a stop
        # in its checks or Ray's start: Ray's log of that start goes too); a folder with
        # anything else in it stays.
        if created and not (paths.local / METADATA_FILE).is_file():
            (paths.local / RAY_LOG_FILE).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            for folder in created:
                folder.rmdir()


def _make(folder: Path, *, given: str) -> None:
    """Create the experiment's folder; what the system refuses is one line, not a traceback."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TunerError(
            f"{given}: cannot create {folder} ({exc.strerror}); give a folder this user can write."
        ) from None


def _default_name(space: str) -> str:
    """``<space file stem>-<time>``, the stem cut to what --name allows."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(space).stem).lstrip("_.-") or "search"
    return f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def refuse_existing(paths: ExperimentPaths) -> None:
    if (paths.local / METADATA_FILE).exists():
        raise TunerError(
            f"Experiment {paths.name!r} already exists in {paths.local.parent}; continue it "
            "with --resume or pick another --name."
        )


def refuse_damaged(paths: ExperimentPaths) -> None:
    """Refuse a resume whose study or Ray state cannot be read, before Ray starts (a study.db
    cut short failed 13 s later, after Ray's start, in a 107-line traceback): exit 2."""
    folder = paths.local
    study = folder / STUDY_FILE
    what = _damaged_study(study) if study.is_file() else None
    if what is None:
        states = sorted(folder.glob(RAY_STATE_GLOB))
        what = _damaged_json(states[-1]) if states else None  # the one Ray restores from
        study = states[-1] if states else study
    if what is not None:
        raise TunerError(
            f"{study} is damaged ({what}): {paths.name!r} cannot be resumed. Put back a copy "
            f"from before the damage, or start a new search (another --name); `tuner report "
            f"{folder}` still reads the trials that finished."
        )


def _damaged_study(path: Path) -> str | None:
    """What is wrong with the Optuna study's SQLite file, or None when it reads whole."""
    try:
        # Read-write, as Optuna opens it: a kill -9 mid-write leaves a hot journal that the
        # first opener rolls back (a read-only open would call that damage).
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=rw", uri=True)) as db:
            check = db.execute("PRAGMA quick_check").fetchone()
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as exc:
        return str(exc)
    if check is None or check[0] != "ok":
        return f"SQLite's check: {check[0] if check else 'no answer'}"
    return None if "studies" in tables else "no Optuna study in it"


def _damaged_json(path: Path) -> str | None:
    try:
        json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return str(exc)
    return None
