"""Writing the experiment folder: where it is, and its metadata file.

What the folder holds, file by file, is declared in :mod:`tuner.experiment_files`. With a URI
storage (``s3://...``) tuner's own files are written to ``experiments/<name>/`` locally and
copied next to Ray's folder at the end.
"""

from __future__ import annotations

import dataclasses
import json
import platform
import shlex
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.errors import TunerError
from tuner.experiment_files import METADATA_FILE, STUDY_FILE, TUNER_FILES
from tuner.search.options import SearchOptions

__all__ = [
    "ExperimentPaths",
    "load_metadata",
    "options_from_metadata",
    "update_metadata",
    "write_metadata",
]

_LOCAL_MIRROR = "experiments"


@dataclass(frozen=True)
class ExperimentPaths:
    """Where one experiment lives."""

    name: str
    storage: str  # what Ray gets as storage_path (absolute path or URI)
    ray_path: str  # Ray's experiment folder: <storage>/<name>
    local: Path  # tuner's own files (experiment_files.TUNER_FILES)

    @classmethod
    def of(cls, storage: str, name: str) -> ExperimentPaths:
        if "://" in storage:
            local = Path(_LOCAL_MIRROR).resolve() / name
            return cls(name, storage, f"{storage.rstrip('/')}/{name}", local)
        root = Path(storage).expanduser().resolve()
        return cls(name, str(root), str(root / name), root / name)

    @property
    def is_remote(self) -> bool:
        return "://" in self.storage

    @property
    def study_file(self) -> Path:
        return self.local / STUDY_FILE

    @property
    def study_url(self) -> str:
        return f"sqlite:///{self.study_file}"

    def resume_command(self, *, address: str | None = None) -> str:
        """The exact command that continues this experiment (``address``: the cluster's)."""
        words = ["python", "-m", "tuner", "search", "--resume", "--name", self.name]
        words += ["--storage", self.storage] + (["--address", address] if address else [])
        return shlex.join(words)

    def upload(self) -> None:
        """Copy the local files next to Ray's folder when the storage is a URI."""
        if not self.is_remote:
            return
        import pyarrow.fs

        for file in TUNER_FILES:
            if (self.local / file).exists():
                pyarrow.fs.copy_files(str(self.local / file), f"{self.ray_path}/{file}")


def write_metadata(paths: ExperimentPaths, fields: dict[str, Any]) -> None:
    """Write ``tuner_experiment.json`` (atomically: a killed driver never leaves half a file)."""
    paths.local.mkdir(parents=True, exist_ok=True)
    target = paths.local / METADATA_FILE
    temporary = target.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(fields, indent=2, sort_keys=True, default=str))
    temporary.replace(target)


def load_metadata(paths: ExperimentPaths) -> dict[str, Any]:
    """Read ``tuner_experiment.json``.

    Raises:
        TunerError: the experiment folder has none (nothing to resume).
    """
    target = paths.local / METADATA_FILE
    if not target.exists():
        raise TunerError(
            f"No experiment {paths.name!r} in {paths.local.parent} ({METADATA_FILE} missing); "
            "check --name and --storage, or start it without --resume."
        )
    return json.loads(target.read_text())


def update_metadata(paths: ExperimentPaths, **changes: Any) -> dict[str, Any]:
    """Merge ``changes`` into ``tuner_experiment.json`` and return the result."""
    fields = {**load_metadata(paths), **changes}
    write_metadata(paths, fields)
    return fields


def options_from_metadata(metadata: dict[str, Any], **changes: Any) -> SearchOptions:
    """The options an experiment was started with, with ``changes`` applied (for --resume)."""
    saved = dict(metadata["options"])
    known = {f.name for f in dataclasses.fields(SearchOptions)}
    return SearchOptions(**{k: v for k, v in {**saved, **changes}.items() if k in known})


def environment() -> dict[str, Any]:
    """Hardware and library versions of the driver (trials report their own device)."""
    import optuna
    import ray
    import timm
    import torch

    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "timm": timm.__version__,
        "ray": ray.__version__,
        "optuna": optuna.__version__,
        "driver_gpus": gpus,
    }


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
