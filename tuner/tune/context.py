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
from typing import TYPE_CHECKING, Any

from tuner.errors import TunerError
from tuner.experiment import DEFAULT_STORAGE, METADATA_FILE, STUDY_FILE, TUNER_FILES, read_metadata
from tuner.experiment.limits import CLOCK, LIMITS, NUM_SAMPLES, TIME_BUDGET, limit_note, new_clock
from tuner.objectives import objectives_of
from tuner.record import ENDED_AT, MAX_MEMORY_BYTES, STARTED_AT
from tuner.spaces import SearchSpace
from tuner.tune.options import SearchOptions
from tuner.tune.plan import SearchPlan, SpaceProfile

if TYPE_CHECKING:  # both import ray: the paths and the options to resume are read without it
    from tuner.tune.cluster import ClusterInfo

__all__ = [
    "ExperimentPaths",
    "SearchContext",
    "now",
    "options_record",
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
        """The exact command that continues this experiment (``address``: the cluster's), with
        the options it keeps that a resume could change, so the command shows all it runs."""
        words = ["python", "-m", "tuner", "search", "--resume", "--name", self.name]
        words += ["--storage", self.storage] + (["--address", address] if address else [])
        saved = (read_metadata(self.local) or {}).get("options") or {}
        default = SearchOptions(space="")
        for name in _SHOWN_ON_RESUME:
            value = saved.get(name, getattr(default, name))
            if value != getattr(default, name):
                flag = "--" + name.replace("_", "-")
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


@dataclass(frozen=True)
class SearchContext:
    """One search as its steps see it, built once by :func:`tuner.tune.run.run_search`."""

    options: SearchOptions
    space: SearchSpace
    plan: SearchPlan
    paths: ExperimentPaths
    search_only: tuple[str, ...] = ()  # suggested names that are no run setting (base_lr)


# Options saved under an earlier name, read under their current one.
_RENAMED = {"time_budget_s": "search_time_budget_s"}
# What a resumed search may take from its own command line: how to reach the cluster and how
# much to print, where the report goes, the time left to re-measurement and effects, and its
# limits (more trials, a later time budget: checked against what it ran, tuner.experiment.limits).
# Every other option is the experiment's own: a resumed search continues the same search.
CHANGEABLE_ON_RESUME = (
    "address", "verbose", "reports_dir", "no_report", "trust_budget", "checkpoint_every_s",
    *LIMITS,
)  # fmt: skip
# Those the command that continues an experiment spells out (how to reach the cluster and how
# much to print are the caller's): what it runs, in full.
_SHOWN_ON_RESUME = ("reports_dir", "no_report", "trust_budget", "checkpoint_every_s", *LIMITS)
_IDENTITY = ("name", "storage", "resume")  # how the experiment was found, not what it runs


def options_to_resume(
    paths: ExperimentPaths, given: SearchOptions, *, named: frozenset[str] | None = None
) -> SearchOptions:
    """The options the experiment at ``paths`` was started with; of those ``given`` sets (the
    fields ``named``, or, without it, those unlike the defaults) the changeable ones are applied
    and said, any other refused. Named, a field can be set back to its default.

    Raises:
        TunerError: the experiment folder has no metadata (nothing to resume), or ``given``
            changes an option a resumed search cannot change.
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
    own = SearchOptions(**{k: v for k, v in saved.items() if k in known})
    if own.num_samples is None and int(metadata.get(NUM_SAMPLES) or -1) > 0:
        # The count it resolved at its start (the space's, the grid's), not resolved again:
        # a new time budget or an edited space would change it.
        own = dataclasses.replace(own, num_samples=int(metadata[NUM_SAMPLES]))
    changes = _changes_on_resume(own, given, paths.local, named)
    return dataclasses.replace(own, **changes, name=paths.name, resume=True)


def _changes_on_resume(
    own: SearchOptions, given: SearchOptions, folder: Path, named: frozenset[str] | None
) -> dict[str, Any]:
    """The options ``given`` sets (``named``: options_to_resume) to another value than the
    experiment's ``own`` (whose folder is ``folder``): the changeable ones, each said in a note
    (what the printed command to continue keeps).

    Raises:
        TunerError: the first one a resumed search cannot apply.
    """
    default = SearchOptions(space="")
    changes: dict[str, Any] = {}
    for field in dataclasses.fields(SearchOptions):
        name = field.name
        value = getattr(given, name)
        if name == "space" and value:  # the same file, given relative or by another spelling
            from tuner.spaces import get_space

            value = get_space(value).ref
        set_here = value != getattr(default, name) if named is None else name in named
        if name in _IDENTITY or not set_here or value == getattr(own, name):
            continue
        if name not in CHANGEABLE_ON_RESUME:
            flag = _flag(name)
            shown = _shown(name, value)
            raise TunerError(
                f"{shown} cannot change on --resume: {own.name or 'the experiment'} continues "
                f"the search it started ({_shown(name, getattr(own, name))}); leave {flag} out, "
                f"or start a new search with it and --warm-start {own.name}."
            )
        if name in LIMITS:
            note = limit_note(name, value, folder=folder, own=own)
        else:
            note = f"{_shown(name, value)} applies from this resume on."
        changes[name] = value
        if name != "verbose":
            print(f"note: {note}", file=sys.stderr)
    return changes


def _shown(name: str, value: Any) -> str:
    """An option as its flag(s) spell it."""
    if name == "overrides":
        sets = " ".join(f"{k}={v}" for k, v in dict(value).items())
        return f"--set {sets}" if sets else "no --set"
    if name == "space":
        return f"space {value}"
    flag = _flag(name)
    if isinstance(value, bool):
        return flag if value else f"no {flag}"
    return f"{flag} {value}"


# The fields whose flag is not their name spelled with dashes.
_FLAGS = {MAX_MEMORY_BYTES: "--max-memory", "overrides": "--set", "space": "SPACE"}


def _flag(name: str) -> str:
    return _FLAGS.get(name, "--" + name.replace("_", "-"))


def start_metadata(
    search: SearchContext, info: ClusterInfo, profile: SpaceProfile, design: list[dict[str, Any]]
) -> dict[str, Any]:
    """The metadata a new search writes before its first trial (its end adds the rest)."""
    from tuner.tune.scheduler import early_stopping_name

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
        NUM_SAMPLES: plan.num_samples,
        TIME_BUDGET: options.search_time_budget_s,
        CLOCK: new_clock(),
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
        "options": options_record(options),
    }


def options_record(options: SearchOptions) -> dict[str, Any]:
    """The options as the metadata keeps them (what --resume reads back)."""
    return {**dataclasses.asdict(options), "overrides": dict(options.overrides)}


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
