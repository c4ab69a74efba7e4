"""Where one experiment lives: :class:`ExperimentPaths`. With a URI storage (``s3://``,
``gs://``, ...), Ray's folder is ``<storage>/<name>`` and tuner's own files are written to
``experiments/<name>/`` locally and copied next to Ray's folder through pyarrow, as Ray does.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from tuner.errors import TunerError
from tuner.experiment._files import DEFAULT_STORAGE, STUDY_FILE, TUNER_FILES
from tuner.experiment._metadata import read_metadata
from tuner.experiment.options import SHOWN_ON_RESUME, SearchOptions

__all__ = ["ExperimentPaths", "refuse_unwritable"]


@dataclass(frozen=True)
class ExperimentPaths:
    """Where one experiment lives."""

    name: str
    storage: str  # what Ray gets as storage_path (absolute path or URI)
    ray_path: str  # Ray's experiment folder: <storage>/<name>
    local: Path  # tuner's own files (tuner.experiment.TUNER_FILES)

    @classmethod
    def of(cls, storage: str, name: str) -> ExperimentPaths:
        if "://" in storage:
            local = Path(DEFAULT_STORAGE).resolve() / name
            return cls(name, storage, f"{storage.rstrip('/')}/{name}", local)
        root = Path(storage).expanduser().resolve()
        return cls(name, str(root), str(root / name), root / name)

    @property
    def study_file(self) -> Path:
        return self.local / STUDY_FILE

    @property
    def study_url(self) -> str:
        return f"sqlite:///{self.study_file}"

    def resume_command(self, *, address: str | None = None) -> str:
        """The exact command that continues this experiment (``address``: the cluster's), with
        the options it keeps that a resume could change, so the command shows all it runs."""
        words = ["python", "-m", "tuner", "search", "--resume", "--name", self.name]
        words += ["--storage", self.storage] + (["--address", address] if address else [])
        saved = (read_metadata(self.local) or {}).get("options") or {}
        default = SearchOptions(space="")
        for name in SHOWN_ON_RESUME:
            value = saved.get(name, getattr(default, name))
            if value != getattr(default, name):
                flag = SearchOptions.flag(name)
                words += [flag] if value is True else [flag, str(value)]
        return shlex.join(words)

    def upload(self) -> None:
        """Copy the local files next to Ray's folder when the storage is a URI."""
        if "://" not in self.storage:
            return
        import pyarrow.fs

        for file in TUNER_FILES:
            if (self.local / file).exists():
                pyarrow.fs.copy_files(str(self.local / file), f"{self.ray_path}/{file}")


def refuse_unwritable(folder: Path, *, given: str) -> None:
    """Refuse, before anything runs, a folder tuner is to write (and create) that cannot be one:
    a file in its place or above it, or a nearest existing folder this user may not write (a
    search's report, found only after its trials, would cost them). ``given``: the flag."""
    folder = Path(folder).expanduser()
    existing = next(p for p in (folder, *folder.absolute().parents) if p.exists())
    if not existing.is_dir():
        raise TunerError(
            f"{given}: {existing} is a file, not a folder; give a folder (it is created if "
            "missing), or move the file."
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise TunerError(f"{given}: this user cannot write in {existing}; give a folder it can.")
