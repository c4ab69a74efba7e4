"""Where a search ends, decided by the limits in the experiment's metadata
(:mod:`tuner.experiment.limits`) instead of the copies Ray Tune pickles, so that a resume can
move them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ray.tune.search import ConcurrencyLimiter
from ray.tune.search.search_generator import SearchGenerator
from ray.tune.stopper import Stopper

from tuner.experiment.limits import SearchLimits, read_limits

__all__ = ["ResumableSearchGenerator", "SearchTimeBudget"]


class ResumableSearchGenerator(SearchGenerator):
    """Tune's ``SearchGenerator``, except that a restored one has not finished (else a resume
    that raised a limit would start nothing); the searcher, asked again, says ``FINISHED``
    where the limits still hold."""

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state({**state, "finished": False})

    def set_finished(self) -> None:
        """Tune stops every trial still on here without telling the searcher: the concurrency
        limiter forgets them, or a resume would wait for them forever."""
        super().set_finished()
        if isinstance(self.searcher, ConcurrencyLimiter):
            self.searcher.live_trials.clear()


class SearchTimeBudget(Stopper):
    """``--search-time-budget-s`` over every run of a search, on the experiment's clock; read
    again when Ray restores this stopper (a resume may have moved the budget)."""

    def __init__(self, experiment_dir: Path) -> None:
        self._folder = str(experiment_dir)
        self._limits: SearchLimits | None = None

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False  # the budget stops the whole search, never one trial

    def stop_all(self) -> bool:
        if self._limits is None:  # read once per run: Tune asks at every step
            self._limits = read_limits(self._folder)
        return self._limits is not None and self._limits.time_is_up(time.time())

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._limits = None
