"""Multi-objective asynchronous successive halving under a constraint (Ray-free core).

Ray's schedulers stop trials on one metric and Optuna's pruners are single-objective; the
throughput/accuracy trade-off under a memory budget needs both objectives and the constraint.
This is ASHA ranked by **non-dominated rank** (MOASHA, Schmucker et al. 2021), infeasible last:

- rungs are report indices ``grace * eta**k`` (by default the first after a third of a
  trial's evaluations, ``eta = 3``);
- a trial at a rung goes on if no trial recorded there dominates it, or if it sits in the best
  ``ceil(n / eta)`` of the ``n`` there (feasibility, front, then crowding distance), judged
  against those before it, never resumed once stopped;
- Hyperband's hedge: with ``brackets=2`` every 4th trial to report (not random, so a replay and
  a search stay in step) runs in a second bracket whose rungs start ``eta`` times later
  (why, measured: bench/README.md).

The Ray adapter is :class:`tuner.tune.scheduler.ParetoASHA`; ``bench/search_replay.py``
replays it offline.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tuner.objectives import nondominated_ranks

__all__ = ["ParetoHalving", "crowding_distance"]


@dataclass
class ParetoHalving:
    """Successive halving by non-dominated rank: about 1 in ``eta`` trials goes on past each
    rung, none at or beyond ``max_reports``; bracket ``b`` starts at ``grace * eta**b`` and
    takes every ``4**b``-th trial to report."""

    directions: Sequence[str]
    grace: int = 1
    eta: int = 3
    max_reports: int | None = None
    brackets: int = 1
    # (bracket, rung) -> the trials recorded there
    records: dict[tuple[int, int], list[tuple[str, tuple[float, ...], bool]]] = field(
        default_factory=dict
    )
    bracket_of_trial: dict[str, int] = field(default_factory=dict)

    @classmethod
    def for_trials_of(cls, directions: Sequence[str], evaluations: int | None) -> ParetoHalving:
        """The first rung after a third of ``evaluations`` (accuracy after a fifth says little of
        the end: bench/search_replay.py), ``eta = 3``."""
        grace = max(1, math.ceil(evaluations / 3)) if evaluations else 1
        return cls(list(directions), grace=grace, eta=3, max_reports=evaluations, brackets=2)

    def bracket(self, trial_id: str) -> int:
        if trial_id not in self.bracket_of_trial:
            n = len(self.bracket_of_trial) + 1
            self.bracket_of_trial[trial_id] = max(b for b in range(self.brackets) if n % 4**b == 0)
        return self.bracket_of_trial[trial_id]

    def rungs(self, bracket: int = 0) -> list[int]:
        rungs = (self.grace * self.eta ** (bracket + k) for k in range(33))  # at most 33
        return [rung for rung in rungs if self.max_reports is None or rung < self.max_reports]

    def continues(
        self, trial_id: str, report: int, values: Sequence[float], feasible: bool
    ) -> bool:
        bracket = self.bracket(trial_id)
        if report not in self.rungs(bracket):
            return True
        point = tuple(float(v) for v in values)
        feasible = feasible and all(math.isfinite(v) for v in point)  # unmeasured: last
        entries = [e for e in self.records.get((bracket, report), []) if e[0] != trial_id]
        entries.append((trial_id, point, feasible))
        self.records[(bracket, report)] = entries
        mine = len(entries) - 1
        if self._key(entries, mine)[:2] == (0, 0):  # feasible and on the rung's front
            return True
        order = sorted(range(len(entries)), key=lambda i: self._key(entries, i))
        return order.index(mine) < math.ceil(len(entries) / self.eta)

    def _key(self, entries: list[tuple[str, tuple[float, ...], bool]], index: int) -> tuple:
        feasible = [i for i, e in enumerate(entries) if e[2]]
        if index not in feasible:
            return (1, 0, 0.0)
        points = np.array([entries[i][1] for i in feasible], dtype=float)
        ranks = nondominated_ranks(points, self.directions)
        mine = feasible.index(index)
        same = [j for j, r in enumerate(ranks) if r == ranks[mine]]
        crowd = crowding_distance(points[same])[same.index(mine)]
        return (0, int(ranks[mine]), -crowd)


def crowding_distance(points: np.ndarray) -> np.ndarray:
    """NSGA-II's crowding distance of each point in one front (ends: infinite)."""
    n = len(points)
    distance = np.zeros(n)
    if n <= 2:
        return np.full(n, np.inf)
    for k in range(points.shape[1]):
        order = np.argsort(points[:, k])
        span = points[order[-1], k] - points[order[0], k]
        distance[order[0]] = distance[order[-1]] = np.inf
        if span <= 0:
            continue
        distance[order[1:-1]] += (points[order[2:], k] - points[order[:-2], k]) / span
    return distance
