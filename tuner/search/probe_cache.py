"""The experiment's cache of speed probes, shared by every trial on every node.

A small Ray actor on the driver's node holds ``key -> SpeedChoice`` (see :mod:`tuner.compare.speed`)
and writes the whole cache to ``probe_cache.json`` in the experiment folder after every change
(atomically), so a resumed search starts with what was already probed. Trials reach it by name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ray

__all__ = ["ProbeCache", "connect_cache", "start_cache"]

_ACTOR_NAME = "tuner_probe_cache"


class ProbeCache:
    """``key -> choice`` (plain dicts), persisted to ``path``."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.entries: dict[str, dict[str, Any]] = _read(self.path)
        self.hits: dict[str, int] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        entry = self.entries.get(key)
        if entry is not None:
            self.hits[key] = self.hits.get(key, 0) + 1
        return entry

    def put(self, key: str, choice: dict[str, Any]) -> None:
        self.entries.setdefault(key, choice)  # two trials probing one key: the first one stays
        self._write()

    def stats(self) -> dict[str, Any]:
        return {"entries": len(self.entries), "hits": dict(self.hits)}

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(self.entries, indent=1, sort_keys=True))
        temporary.replace(self.path)


def _read(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}  # none yet, or damaged: probing again is only a few seconds per key
    return data if isinstance(data, dict) else {}


def start_cache(path: Path, namespace: str) -> Any:
    """Start the cache actor on this (the driver's) node, where the experiment folder is."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node = ray.get_runtime_context().get_node_id()
    actor = ray.remote(num_cpus=0, max_restarts=-1)(ProbeCache)
    return actor.options(
        name=_ACTOR_NAME,
        namespace=namespace,
        get_if_exists=True,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False),
    ).remote(str(path))


def connect_cache(namespace: str) -> Any:
    """The running cache actor (from inside a trial)."""
    return ray.get_actor(_ACTOR_NAME, namespace=namespace)
