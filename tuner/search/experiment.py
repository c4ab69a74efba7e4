"""The search's side of its experiment folder (the folder itself is :mod:`tuner.experiment`'s):
:class:`ExperimentPaths` (with a URI storage, tuner's own files are written to
``experiments/<name>/`` locally and copied next to Ray's folder through pyarrow, as Ray does),
the metadata a new search starts with, the options of a search to resume; :class:`SearchContext`,
what every step of one search is handed.
"""

from __future__ import annotations

import dataclasses
import platform
import shlex
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.errors import TunerError
from tuner.experiment import METADATA_FILE, STUDY_FILE, TUNER_FILES, read_metadata
from tuner.objectives import objectives_of
from tuner.record import ENDED_AT, MAX_MEMORY_BYTES, STARTED_AT
from tuner.search.cluster import ClusterInfo
from tuner.search.options import DEFAULT_STORAGE, SearchOptions
from tuner.search.plan import SearchPlan, SpaceProfile
from tuner.search.scheduler import early_stopping_name
from tuner.spaces import SearchSpace

__all__ = [
    "ExperimentPaths",
    "SearchContext",
    "now",
    "options_to_resume",
    "start_metadata",
    "study_attrs",
]


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
        """The exact command that continues this experiment (``address``: the cluster's)."""
        words = ["python", "-m", "tuner", "search", "--resume", "--name", self.name]
        words += ["--storage", self.storage] + (["--address", address] if address else [])
        return shlex.join(words)

    def upload(self) -> None:
        """Copy the local files next to Ray's folder when the storage is a URI."""
        if "://" not in self.storage:
            return
        import pyarrow.fs

        for file in TUNER_FILES:
            if (self.local / file).exists():
                pyarrow.fs.copy_files(str(self.local / file), f"{self.ray_path}/{file}")


@dataclass(frozen=True)
class SearchContext:
    """One search as its steps see it, built once by :func:`tuner.search.run.run_search`."""

    options: SearchOptions
    space: SearchSpace
    plan: SearchPlan
    paths: ExperimentPaths
    search_only: tuple[str, ...] = ()  # suggested names that are no run setting (base_lr)


# Options saved under an earlier name, read under their current one.
_RENAMED = {"time_budget_s": "search_time_budget_s"}


def options_to_resume(paths: ExperimentPaths, **changes: Any) -> SearchOptions:
    """The options the experiment at ``paths`` was started with, ``changes`` applied.

    Raises:
        TunerError: the experiment folder has no metadata (nothing to resume).
    """
    metadata = read_metadata(paths.local)
    if not metadata:
        raise TunerError(
            f"No experiment {paths.name!r} in {paths.local.parent} ({METADATA_FILE} missing); "
            "check --name and --storage, or start it without --resume."
        )
    saved = {_RENAMED.get(k, k): v for k, v in metadata["options"].items()}
    known = {f.name for f in dataclasses.fields(SearchOptions)}
    for name in sorted(set(saved) - known):
        # Kept in the metadata by an older tuner: said, so a resumed search is not silently
        # another search.
        print(
            f"note: option {name!r} saved by an older tuner is unknown here; ignored.",
            file=sys.stderr,
        )
    return SearchOptions(**{k: v for k, v in {**saved, **changes}.items() if k in known})


def start_metadata(
    search: SearchContext, info: ClusterInfo, profile: SpaceProfile, design: list[dict[str, Any]]
) -> dict[str, Any]:
    """The metadata a new search writes before its first trial (its end adds the rest)."""
    options, space, plan, paths = search.options, search.space, search.plan, search.paths
    return {
        "name": paths.name,
        "space": space.name,
        "space_source": space.source,
        "search_only_params": profile.search_only,
        "pinned_params": profile.pinned,
        "startup_design": design,
        "speed_probes": {"repeats": options.speed_repeats, "steps": options.probe_steps},
        "workload_kind": plan.workload_kind,
        "workload": plan.workload,
        "objective": options.objective,
        "objectives": [{"metric": m, "direction": d} for m, d in objectives_of(options.objective)],
        "sampler": options.sampler,
        "seed": options.seed,
        "num_samples": plan.num_samples,
        "search_time_budget_s": options.search_time_budget_s,
        MAX_MEMORY_BYTES: options.max_memory_bytes,
        "concurrency": plan.concurrency,
        "resources_per_trial": {"cpu": plan.cpus_per_trial, "gpu": plan.gpus_per_trial},
        "gpus_shared": plan.gpus_shared,
        "early_stopping": early_stopping_name(options),
        "cluster": dataclasses.asdict(info),
        "environment": _environment(),
        "study": {"path": str(paths.study_file), "name": paths.name},
        "ray_experiment_path": paths.ray_path,
        STARTED_AT: now(),
        ENDED_AT: None,
        "state": "running",
        "options": {**dataclasses.asdict(options), "overrides": dict(options.overrides)},
    }


def study_attrs(metadata: dict[str, Any]) -> dict[str, Any]:
    """What optuna-dashboard shows about the study (the question and the machine), taken from
    the search's metadata."""
    env, resources = metadata["environment"], metadata["resources_per_trial"]
    return {
        **{key: metadata[key] for key in ("space", "workload_kind", "workload", "objective")},
        MAX_MEMORY_BYTES: metadata[MAX_MEMORY_BYTES],
        "hardware": {
            "host": env["host"],
            "gpus": env["driver_gpus"],
            "gpus_per_trial": resources["gpu"],
            "cpus_per_trial": resources["cpu"],
        },
        "versions": {k: env[k] for k in ("torch", "cuda", "timm", "ray", "optuna")},
    }


def _environment() -> dict[str, Any]:
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
