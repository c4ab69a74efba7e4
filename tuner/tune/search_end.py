"""Where a search ends, decided by tuner's limits (:mod:`tuner.experiment.limits`: the trial count
and time budget in the experiment's metadata) instead of the copies Ray Tune pickles, so that a
resume can move them: Tune's search generator, which asks the searcher again after a restore
(the searcher says ``FINISHED`` at the count), and the time budget as a stopper that reads the
budget and the clock from the metadata.
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
    """Tune's ``SearchGenerator``, except that a restored one has not finished. Tune saves that
    it had (the searcher said ``FINISHED`` at the trial count, or the time budget stopped it)
    and restores it, so a resume that raised a limit would start nothing; asked again, the
    searcher says ``FINISHED`` again where the limits still hold, before any trial starts."""

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state({**state, "finished": False})

    def set_finished(self) -> None:
        """Tune ends the search here (its time budget ran out) and stops every trial still on
        without telling the searcher: the concurrency limiter forgets them, or a resume that
        goes on would wait for them forever (Optuna is told: searcher.close_orphans)."""
        super().set_finished()
        if isinstance(self.searcher, ConcurrencyLimiter):
            self.searcher.live_trials.clear()


class SearchTimeBudget(Stopper):
    """``--search-time-budget-s`` over every run of a search: stops the whole search, its
    running trials included, once its trials have run the budget on the experiment's clock.
    Ray pickles this stopper with its runner; restored, it reads the budget and the clock again
    (a resume may have moved the budget, and the clock counts this run from its start)."""

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
