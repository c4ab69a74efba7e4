"""The one Ray actor a search's trials share, on the driver's node: the speed probes' cache and
what each running trial is doing (the console's running line). A trial reaches it through a
:class:`TrialStore`: :class:`ActorStore`, or :class:`NullStore`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import ray

from tuner.speed.cache import Lookup, ProbeCache, Remembered
from tuner.speed.session import Store

__all__ = ["ActorStore", "NullStore", "TrialStore", "TrialsActor", "connect_actor", "start_actor"]

_ACTOR_NAME = "tuner_trials"


class TrialsActor(ProbeCache):
    """The speed probes' cache, and what each running trial told it is doing."""

    def __init__(
        self, path: str, machine_dir: str | None = None, fresh: bool = False, experiment: str = ""
    ) -> None:
        super().__init__(path, machine_dir, fresh, experiment)
        self.doing: dict[str, tuple[str, float]] = {}  # trial id -> (what, since: unix time)

    def tell(self, trial_id: str, what: str) -> None:
        if what:
            self.doing[trial_id] = (what, time.time())
        else:
            self.doing.pop(trial_id, None)

    def activity(self) -> dict[str, tuple[str, float]]:
        return dict(self.doing)


def start_actor(
    path: Path, namespace: str, *, machine_dir: Path, fresh: bool, experiment: str
) -> Any:
    """On the driver's node, where the experiment folder is."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node = ray.get_runtime_context().get_node_id()
    actor = ray.remote(num_cpus=0, max_restarts=-1)(TrialsActor)
    return actor.options(
        name=_ACTOR_NAME,
        namespace=namespace,
        get_if_exists=True,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False),
    ).remote(str(path), str(machine_dir), fresh, experiment)


def connect_actor(namespace: str) -> Any:
    return ray.get_actor(_ACTOR_NAME, namespace=namespace)


class TrialStore(Store, Protocol):
    """The speed session's calls, and the trial's own two (its earned probe time, its cost)."""

    def earn(self, earned_s: float) -> None: ...

    def observe(self, cost: dict[str, Any]) -> None: ...

    # The key a speed key is kept under in the experiment's probe cache (its phase log says it).
    def cache_key(self, key: str) -> str: ...


class NullStore:
    """Nothing remembered, every probe run unbounded and unclaimed, nothing told (the ranks)."""

    def get(self, lookup: Lookup) -> Remembered | None:
        return None

    def put(self, lookup: Lookup, choice: dict[str, Any]) -> None:
        return None

    def draw(self, earned_s: float) -> float | None:
        return None

    def settle(self, returned_s: float, spent_s: float, earned_late_s: float) -> None:
        return None

    def claim(self, key: str, for_s: float) -> bool:
        return True

    def prior_run_s(self, config: dict[str, Any], steps: int) -> float | None:
        return None

    def earn(self, earned_s: float) -> None:
        return None

    def observe(self, cost: dict[str, Any]) -> None:
        return None

    def cache_key(self, key: str) -> str:
        return key

    def tell(self, what: str) -> None:
        return None


@dataclass(frozen=True)
class ActorStore:
    """Trial ``trial_id``'s calls to the actor. Each gives up quietly (as if nothing were
    cached; a draw grants the trial's own share): never fail a trial over an optimization."""

    namespace: str
    trial_id: str

    def get(self, lookup: Lookup) -> Remembered | None:
        return self._call("get", lookup)

    def put(self, lookup: Lookup, choice: dict[str, Any]) -> None:
        self._call("put", lookup, choice)

    def draw(self, earned_s: float) -> float | None:
        granted = self._call("draw", self.trial_id, earned_s)
        return earned_s if granted is None else granted

    def settle(self, returned_s: float, spent_s: float, earned_late_s: float) -> None:
        self._call("settle", self.trial_id, returned_s, spent_s, earned_late_s)

    def claim(self, key: str, for_s: float) -> bool:
        return self._call("claim", key, self.trial_id, for_s) in (None, self.trial_id)

    def prior_run_s(self, config: dict[str, Any], steps: int) -> float | None:
        return self._call("prior_run_s", config, steps)

    def earn(self, earned_s: float) -> None:
        self._call("earn", self.trial_id, earned_s)

    def observe(self, cost: dict[str, Any]) -> None:
        self._call("observe", cost)

    def cache_key(self, key: str) -> str:
        return key

    def tell(self, what: str) -> None:
        if self.namespace and self.trial_id:
            try:
                connect_actor(self.namespace).tell.remote(self.trial_id, what)
            except Exception:
                return

    def _call(self, method: str, *args: Any) -> Any:
        if not self.namespace:
            return None
        try:
            return ray.get(getattr(connect_actor(self.namespace), method).remote(*args), timeout=30)
        except Exception:
            return None
