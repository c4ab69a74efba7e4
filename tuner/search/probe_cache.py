"""The experiment's cache of speed probes, shared by every trial on every node: a small Ray
actor on the driver's node holds ``key -> SpeedChoice`` and writes it to ``probe_cache.json``
after every change, so a resumed search starts with what was already probed.

It reads and writes through to the machine cache (:mod:`tuner.search.machine_cache`), under the
trial's machine fingerprint, unless that verdict had fewer ``--speed-repeats`` than asked for;
``fresh`` (``--fresh-probes``) skips the reading, not the writing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from tuner.search.machine_cache import Entry, Machine, MachineCache, entry_key, replace_json

__all__ = [
    "Lookup",
    "ProbeCache",
    "Remembered",
    "connect_cache",
    "machine_cache_line",
    "start_cache",
]

_ACTOR_NAME = "tuner_probe_cache"


@dataclass(frozen=True)
class Remembered:
    """A speed choice found in a cache, and which one."""

    choice: dict[str, Any]
    source: str  # "cache" (this experiment probed it) | "machine cache" (an earlier search did)
    age_s: float | None = None  # how long ago an earlier search measured it


@dataclass(frozen=True)
class Lookup:
    """Where a trial's speed choice is remembered: the experiment's key, and per machine."""

    key: str  # tuner.compare.speed.speed_key
    machine: Machine  # the trial's machine (a cluster's nodes may differ)
    max_memory_bytes: int | None
    threads: int | None = None  # the trial's CPU threads
    repeats: int = 0  # --speed-repeats: an earlier search's verdict on fewer is not reused

    @property
    def machine_key(self) -> str:
        return entry_key(self.key, max_memory_bytes=self.max_memory_bytes, threads=self.threads)


class ProbeCache:
    """``key -> choice`` (plain dicts), persisted to ``path``, read and written through to the
    machine cache in ``machine_dir`` (``None``: no machine cache)."""

    def __init__(
        self, path: str, machine_dir: str | None = None, fresh: bool = False, experiment: str = ""
    ) -> None:
        self.path = Path(path)
        self.entries: dict[str, dict[str, Any]] = _read(self.path)
        self.hits: dict[str, int] = {}
        self.machine_dir = None if machine_dir is None else Path(machine_dir)
        self.fresh = fresh
        self.experiment = experiment
        self.earlier: dict[str, Entry] = {}  # key -> what an earlier search measured
        self.written = 0

    def get(self, lookup: Lookup) -> Remembered | None:
        key = lookup.key
        if key not in self.entries and not self._read_through(lookup):
            return None
        self.hits[key] = self.hits.get(key, 0) + 1
        if key in self.earlier:
            return Remembered(self.entries[key], "machine cache", self.earlier[key].age_s())
        return Remembered(self.entries[key], "cache")

    def put(self, lookup: Lookup, choice: dict[str, Any]) -> None:
        if lookup.key in self.entries:
            return  # two trials probing one key: the first one stays
        self.entries[lookup.key] = choice
        self._write()
        if self.machine_dir is None:
            return
        measured = choice.get("first_step_unix_s") or time.time()
        entry = Entry(choice, float(measured), self.experiment)
        try:
            MachineCache(lookup.machine, self.machine_dir).put(lookup.machine_key, entry)
        except OSError:  # a read-only or full cache folder: the next search probes again
            return
        self.written += 1

    def stats(self) -> dict[str, Any]:
        machine = {
            "folder": None if self.machine_dir is None else str(self.machine_dir),
            "fresh": self.fresh,
            "reused": len(self.earlier),
            "written": self.written,
        }
        return {"entries": len(self.entries), "hits": dict(self.hits), "machine_cache": machine}

    def _read_through(self, lookup: Lookup) -> bool:
        if self.machine_dir is None or self.fresh:
            return False
        entry = MachineCache(lookup.machine, self.machine_dir).get(lookup.machine_key)
        if entry is None or int(entry.choice.get("repeats") or 0) < lookup.repeats:
            return False  # a verdict on fewer repeats than asked for is probed again
        self.entries[lookup.key] = entry.choice
        self.earlier[lookup.key] = entry
        self._write()
        return True

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        replace_json(self.path, self.entries)


def machine_cache_line(stats: dict[str, Any]) -> str:
    """What the machine cache did in a search, in one line (from :meth:`ProbeCache.stats`)."""
    machine = stats.get("machine_cache") or {}
    if machine.get("folder") is None:
        return "Speed probes: not remembered across searches (no machine cache)."
    ignored = " (--fresh-probes: earlier ones ignored)" if machine.get("fresh") else ""
    return (
        f"Speed probes: {machine.get('reused', 0)} training config(s) reused from earlier "
        f"searches on this machine, {machine.get('written', 0)} probed and remembered{ignored} "
        f"in {machine['folder']}"
    )


def _read(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}  # none yet, or damaged: probing again is only a few seconds per key
    return data if isinstance(data, dict) else {}


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
