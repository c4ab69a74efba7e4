"""The experiment's cache of speed probes (Ray-free; the trials' actor,
:mod:`tuner.tune.trials_actor`, holds one): ``key -> SpeedChoice``, written to
``probe_cache.json`` after every change (a resumed search keeps it), the probe pool
(:mod:`tuner.speed.budget`), the claims that keep two trials from probing one key, and reads and
writes through to the machine cache (a verdict on fewer ``--speed-repeats`` than asked is not
reused; ``--fresh-probes`` skips the reading, not the writing).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.speed.budget import predicted_run_s
from tuner.speed.machine_cache import Entry, Machine, MachineCache, entry_key, replace_json

__all__ = [
    "Lookup",
    "ProbeCache",
    "Remembered",
    "machine_cache_line",
    "probe_budget_line",
]


@dataclass(frozen=True)
class Remembered:
    """A speed choice found in a cache, and which one."""

    choice: dict[str, Any]
    source: str  # "cache" (this experiment probed it) | "machine cache" (an earlier search did)
    age_s: float | None = None  # how long ago an earlier search measured it


@dataclass(frozen=True)
class Lookup:
    """Where a trial's speed choice is remembered: the experiment's key, and per machine."""

    key: str  # tuner.speed.choose.speed_key
    machine: Machine  # the trial's machine (a cluster's nodes may differ)
    max_memory_bytes: int | None
    threads: int | None = None  # the trial's CPU threads
    repeats: int = 0  # --speed-repeats: an earlier search's verdict on fewer is not reused

    @property
    def machine_key(self) -> str:
        return entry_key(self.key, max_memory_bytes=self.max_memory_bytes, threads=self.threads)


class ProbeCache:
    """``key -> choice`` (plain dicts) in ``path``; ``machine_dir`` None: no machine cache."""

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
        self.pool_s = 0.0  # probe seconds earned by the trials and not spent yet
        self.earned: dict[str, float] = {}  # trial id -> the share it put in the pool
        self.spent_s = 0.0
        self.claims: dict[str, tuple[str, float]] = {}  # key -> (trial probing it, until when)
        self.costs: list[dict[str, Any]] = []  # trials' runs (budget.run_cost): probe priors

    def draw(self, trial_id: str, earned_s: float) -> float:
        """Put the trial's share in the pool (once: a retry does not earn again) and give it
        the whole pool; the unspent rest comes back with :meth:`settle`."""
        if trial_id not in self.earned:
            self.earned[trial_id] = earned_s
            self.pool_s += earned_s
        granted, self.pool_s = self.pool_s, 0.0
        return granted

    def prior_run_s(self, config: dict[str, Any] | None = None, steps: int = 0) -> float | None:
        """A new session's first probe run of ``config`` (a dict), predicted from the trials'
        runs (alike ones first), else the slowest probe run here; None before any."""
        if config is not None:
            # Alike runs; else any run told, at this batch size (the slowest: a search whose
            # every config differs in an alike field would otherwise never probe).
            predicted = predicted_run_s(self.costs, config, steps) or predicted_run_s(
                self.costs, config, steps, alike=False
            )
            if predicted is not None:
                return predicted
        runs = [c.get("slowest_run_s") for c in self.entries.values()]
        return max((float(r) for r in runs if r), default=None)

    def observe(self, cost: dict[str, Any]) -> None:
        """A trial's own run's cost (budget.run_cost): a prior for later probe runs."""
        self.costs.append(cost)

    def earn(self, trial_id: str, earned_s: float) -> None:
        """A trial ended: its measured share replaces what it earned in advance."""
        self.pool_s += earned_s - self.earned.get(trial_id, 0.0)
        self.earned[trial_id] = earned_s

    def settle(
        self, trial_id: str, returned_s: float, spent_s: float, earned_late_s: float
    ) -> None:
        """A draw's unspent rest (negative: a run went over), the spending, the late share."""
        self.pool_s += returned_s
        self.spent_s += spent_s
        self.earned[trial_id] = self.earned.get(trial_id, 0.0) + earned_late_s

    def claim(self, key: str, trial_id: str, for_s: float) -> str:
        """Who probes ``key``: the caller, unless another live trial claimed it (its id)."""
        holder, until = self.claims.get(key, ("", 0.0))
        if holder and holder != trial_id and until > time.time() and key not in self.entries:
            return holder
        self.claims[key] = (trial_id, time.time() + for_s)
        return trial_id

    def get(self, lookup: Lookup) -> Remembered | None:
        key = lookup.key
        if key not in self.entries and not self._read_through(lookup):
            return None
        self.hits[key] = self.hits.get(key, 0) + 1
        if key in self.earlier:
            return Remembered(self.entries[key], "machine cache", self.earlier[key].age_s())
        return Remembered(self.entries[key], "cache")

    def put(self, lookup: Lookup, choice: dict[str, Any]) -> None:
        """Keep ``choice``; over an earlier one only when it probed more knobs."""
        self.claims.pop(lookup.key, None)
        earlier = self.entries.get(lookup.key)
        if earlier is not None and len(choice.get("not_probed") or []) >= len(
            earlier.get("not_probed") or []
        ):
            return
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
        pool = {
            "earned_s": sum(self.earned.values()),
            "spent_s": self.spent_s,
            "left_s": self.pool_s,
        }
        return {
            "entries": len(self.entries),
            "hits": dict(self.hits),
            "machine_cache": machine,
            "probe_budget": pool,
        }

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
    """What the machine cache did in a search (from :meth:`ProbeCache.stats`)."""
    machine = stats.get("machine_cache") or {}
    if machine.get("folder") is None:
        return "Speed probes: not remembered across searches (no machine cache)."
    ignored = " (--fresh-probes: earlier ones ignored)" if machine.get("fresh") else ""
    return (
        f"Speed probes: {machine.get('reused', 0)} training config(s) reused from earlier "
        f"searches on this machine, {machine.get('written', 0)} probed and remembered{ignored} "
        f"in {machine['folder']}"
    )


def probe_budget_line(stats: dict[str, Any]) -> str | None:
    """The probe spending against what the trials earned (None: no trial probed)."""
    pool = stats.get("probe_budget") or {}
    earned, spent = float(pool.get("earned_s") or 0.0), float(pool.get("spent_s") or 0.0)
    if not earned and not spent:
        return None
    return (
        f"Speed-probe budget: {spent:.1f} s spent of the {earned:.1f} s the trials earned "
        "(--probe-share of each trial's length)."
    )


def _read(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}  # none yet, or damaged: probing again is only a few seconds per key
    return data if isinstance(data, dict) else {}
