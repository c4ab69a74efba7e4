"""A trial that is slow to end after an early stop must not stall the search (real local Ray).

Ray 2.60 reuses a stopped trial's process for the next trial only if the stopped trial's
thread ends within ``TUNE_FUNCTION_THREAD_TIMEOUT_S``; past it, the next trial ends as ERROR
without the searcher being told, and a concurrency limit of one never frees its slot, so the
search waits forever (seen in the main job on a busy machine). ``allow_slow_trial_exit``, which
every trial calls first, gives the thread a minute.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
import ray
from ray import tune
from ray.tune.schedulers import FIFOScheduler, TrialScheduler
from ray.tune.search import ConcurrencyLimiter
from ray.tune.search.optuna import OptunaSearch

from tuner.tune.trainable import allow_slow_trial_exit


def _slow_to_end(config: dict[str, Any]) -> None:
    allow_slow_trial_exit()
    try:
        for step in range(3):
            tune.report({"score": config["x"] + step})
    finally:
        time.sleep(3)  # past Ray's default 2 s: gc and a loader's shutdown on a busy machine


class _StopAtFirstReport(FIFOScheduler):
    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        return TrialScheduler.STOP


@pytest.mark.slow
@pytest.mark.timeout(240)  # the bug is a search that never ends
def test_a_trial_slow_to_end_after_a_stop_does_not_stall_the_next(tmp_path: Path) -> None:
    space = {"x": tune.uniform(0, 1)}
    searcher = OptunaSearch(space=space, metric="score", mode="max", seed=0)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import it
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        grid = tune.Tuner(
            _slow_to_end,
            tune_config=tune.TuneConfig(
                search_alg=ConcurrencyLimiter(searcher, max_concurrent=1),
                scheduler=_StopAtFirstReport(),
                num_samples=3,
                reuse_actors=True,
            ),
            run_config=tune.RunConfig(storage_path=str(tmp_path), name="reuse", verbose=0),
        ).fit()
    finally:
        ray.shutdown()
    assert len(grid) == 3 and not grid.errors
    assert all(result.metrics["score"] == result.config["x"] for result in grid)
