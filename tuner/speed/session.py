"""A trial's speed settings (:func:`settle_speed`, before it trains): per scope (shared, then
per config) the verdict is looked up, waited for while another trial probes it, probed within
the trial's probe budget, or completed where an earlier budget left it short. Ray-free: the
cache is reached through a :class:`Store`.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Protocol

from tuner.config import TrainConfig
from tuner.speed.budget import ProbeBudget, trial_length_s
from tuner.speed.cache import Lookup, Remembered
from tuner.speed.choose import Measure, OnRun, Scope, choose_speed, speed_key
from tuner.speed.machine_cache import Machine
from tuner.speed.rule import SpeedChoice, merged
from tuner.units import sum_or_none

__all__ = ["Settled", "Store", "TrialSpeed", "settle_speed"]

_WAIT_POLL_S = 1.0


class Store(Protocol):
    """The probe cache as one trial sees it; ``tell``: the console's running line."""

    def get(self, lookup: Lookup) -> Remembered | None: ...

    def put(self, lookup: Lookup, choice: dict[str, Any]) -> None: ...

    def draw(self, earned_s: float) -> float | None: ...  # None: unbounded

    def settle(self, returned_s: float, spent_s: float, earned_late_s: float) -> None: ...

    def claim(self, key: str, for_s: float) -> bool: ...  # True: this trial probes it

    # A probe run of this config (a TrainConfig's dict), predicted from what the search saw.
    def prior_run_s(self, config: dict[str, Any], steps: int) -> float | None: ...

    def tell(self, what: str) -> None: ...


@dataclass(frozen=True)
class TrialSpeed:
    """What decides a trial's speed probes, besides its config."""

    cuda: bool
    device_name: str
    pinned: Collection[str]
    cores: int
    threads: int
    machine: Machine
    max_memory_bytes: int | None
    steps: int  # measured steps of each probe run
    repeats: int
    share: float | None  # of the trials' time (tuner.speed.budget); None: no bound


@dataclass(frozen=True)
class Settled:
    """A trial's speed settings and what they cost it."""

    choice: SpeedChoice
    source: str  # probed | cache | machine cache
    probe_s: float = 0.0  # wall seconds of this trial's own probe runs (the pool's charge)
    wait_s: float = 0.0  # wall seconds it waited while another trial probed its key
    budget_s: float | None = None  # probe seconds it was allowed (None: unbounded, or none ran)
    cache_age_s: float | None = None  # of a verdict an earlier search measured
    keys: tuple[str, ...] = ()  # the probe-cache keys the choice rests on (shared, config)


def settle_speed(
    config: TrainConfig,
    speed: TrialSpeed,
    store: Store,
    on_run: OnRun | None = None,
    measure: Measure | None = None,
) -> Settled:
    """The shared verdict, then the per-config knobs on top (``measure``: one probe run)."""
    shared = _session(config, speed, store, "shared", {}, on_run, measure)
    own = _session(config, speed, store, "config", shared.choice.settings, on_run, measure)
    store.tell("")
    probed = "probed" in (shared.source, own.source)
    return Settled(
        merged(shared.choice, own.choice),
        "probed" if probed else shared.source,
        shared.probe_s + own.probe_s,
        shared.wait_s + own.wait_s,
        sum_or_none(shared.budget_s, own.budget_s),
        shared.cache_age_s,
        (*shared.keys, *own.keys),
    )


def _session(
    config: TrainConfig,
    speed: TrialSpeed,
    store: Store,
    scope: Scope,
    base: dict[str, Any],
    on_run: OnRun | None,
    measure: Measure | None,
) -> Settled:
    """One scope's verdict: remembered, waited for, probed, or completed."""
    key = speed_key(config, speed.device_name, speed.pinned, cores=speed.cores, scope=scope)
    lookup = Lookup(key, speed.machine, speed.max_memory_bytes, speed.threads, speed.repeats)
    found, wait_s = _found_or_claimed(store, lookup, config)
    if found is not None and not found.choice.get("not_probed"):
        choice = SpeedChoice.from_dict(found.choice)
        return Settled(choice, found.source, wait_s=wait_s, cache_age_s=found.age_s, keys=(key,))
    earlier = None if found is None else SpeedChoice.from_dict(found.choice)
    length = trial_length_s(config, None)
    granted = None if speed.share is None else store.draw(speed.share * (length or 0.0))
    budget = ProbeBudget(
        granted,
        speed.share or 0.0,
        earn_later=config if length is None else None,
        # This config's run as alike runs predict it, else the slowest run seen (an earlier
        # session's of this verdict may have measured another batch size).
        prior_run_s=store.prior_run_s(config.to_dict(), speed.steps)
        or (earlier.slowest_run_s if earlier is not None else None),
    )
    choice = choose_speed(
        config,
        cuda=speed.cuda,
        pinned=speed.pinned,
        steps=speed.steps,
        repeats=speed.repeats,
        max_memory_bytes=speed.max_memory_bytes,
        cores=speed.cores,
        scope=scope,
        budget=budget,
        base={**base, **(earlier.settings if earlier else {})},
        only=None if earlier is None else earlier.not_probed,
        on_run=on_run,
        measure=measure,
    )
    if granted is not None:  # a debt (granted < 0) stays in the pool, with any overspend
        left = granted + budget.earned_late_s - budget.spent_s
        store.settle(left, budget.spent_s, budget.earned_late_s)
    if earlier is not None:
        choice = merged(earlier, choice)
    # Kept even when nothing ran: "nothing to probe here" is a verdict too, and knobs the
    # budget left unprobed are completed by the next trial that finds them (it releases the
    # claim as well).
    store.put(lookup, choice.to_dict())
    source = "probed" if budget.runs else (found.source if found else "probed")
    # Its runs' seconds, the clock's, as the pool was charged: the cache's round trips around
    # them (the lookup, this put, the settling) are no probe (rule.SpeedChoice.probe_seconds).
    return Settled(choice, source, budget.spent_s, wait_s, choice.budget_s, keys=(key,))


def _found_or_claimed(
    store: Store, lookup: Lookup, config: TrainConfig
) -> tuple[Remembered | None, float]:
    """The remembered verdict, after waiting while another trial probes it (a claim lasts
    twice its trial's length, at least a minute: a dead trial does not block others), and the
    seconds waited: from the first refused claim on (the lookups' round trips are no wait; a
    busy machine's first one took 16 s)."""
    found = store.get(lookup)
    claim_s = max(60.0, 2 * (trial_length_s(config, None) or 0.0))
    waiting: float | None = None
    while found is None and not store.claim(lookup.key, claim_s):
        waiting = time.perf_counter() if waiting is None else waiting
        store.tell("waiting for another trial's speed probes")
        time.sleep(_WAIT_POLL_S)
        found = store.get(lookup)
    return found, 0.0 if waiting is None else time.perf_counter() - waiting
