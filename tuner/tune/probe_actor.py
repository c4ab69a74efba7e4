"""The probe cache's Ray actor: one :class:`tuner.speed.cache.ProbeCache` per experiment, on
the driver's node (where the experiment folder is), which every trial reaches by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ray

from tuner.speed.cache import ProbeCache

__all__ = ["connect_cache", "start_cache", "tell"]

_ACTOR_NAME = "tuner_probe_cache"


def start_cache(
    path: Path, namespace: str, *, machine_dir: Path, fresh: bool, experiment: str
) -> Any:
    """Start the cache actor on this (the driver's) node, where the experiment folder is.
    ``machine_dir`` is resolved in the driver: the actor's environment is the node's."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node = ray.get_runtime_context().get_node_id()
    actor = ray.remote(num_cpus=0, max_restarts=-1)(ProbeCache)
    return actor.options(
        name=_ACTOR_NAME,
        namespace=namespace,
        get_if_exists=True,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False),
    ).remote(str(path), str(machine_dir), fresh, experiment)


def connect_cache(namespace: str) -> Any:
    """The running cache actor (from inside a trial)."""
    return ray.get_actor(_ACTOR_NAME, namespace=namespace)


def tell(namespace: str, trial_id: str, what: str) -> None:
    """What a trial does before its first report, for the console's running line (the probe
    cache keeps it): fire and forget, never worth a wait."""
    if namespace and trial_id:
        try:
            connect_cache(namespace).tell.remote(trial_id, what)
        except Exception:
            return
