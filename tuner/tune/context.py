"""What every step of one search is handed (:class:`SearchContext`), and the metadata a new
search starts with."""

from __future__ import annotations

import dataclasses
import platform
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tuner.experiment.limits import CLOCK, NUM_SAMPLES, TIME_BUDGET, new_clock
from tuner.experiment.options import SearchOptions, options_record
from tuner.experiment.paths import ExperimentPaths
from tuner.objectives import objectives_of
from tuner.record import ENDED_AT, MAX_MEMORY_BYTES, STARTED_AT
from tuner.spaces import SearchSpace
from tuner.tune.plan import SearchPlan, SpaceProfile

if TYPE_CHECKING:  # imports ray
    from tuner.tune.cluster import ClusterInfo

__all__ = ["SearchContext", "now", "start_metadata", "study_attrs"]


@dataclass(frozen=True)
class SearchContext:
    options: SearchOptions
    space: SearchSpace
    plan: SearchPlan
    paths: ExperimentPaths
    search_only: tuple[str, ...] = ()  # suggested names that are no run setting (base_lr)


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


def study_attrs(metadata: dict[str, Any]) -> dict[str, Any]:
    """What optuna-dashboard shows about the study: the question and the machine."""
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
