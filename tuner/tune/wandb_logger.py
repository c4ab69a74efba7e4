"""``--wandb PROJECT``: one offline W&B run per trial, logged from the driver by training step
into ``<experiment>/wandb/`` (README, "Weights & Biases").

Not Ray's ``WandbLoggerCallback``: that one reads ``WANDB_PROJECT_NAME`` (not ``WANDB_PROJECT``),
logs a final report at its last evaluation's step again, writes each trial's files into Ray's
session folder before they are complete, and lets W&B print between the trial lines.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import wandb
from ray.tune.logger import LoggerCallback

from tuner import record
from tuner.tune import tracking

__all__ = ["WandbOfflineCallback", "log_time_to_target"]

_KIND_TAG = "kind: "  # the tag that says a run's kind: "kind: stopped early"


class WandbOfflineCallback(tracking.StepLogger, LoggerCallback):
    _client, _failed = "W&B", False  # for tracking.guarded

    def __init__(self, *, project: str, folder: Path, tags: Mapping[str, str]) -> None:
        super().__init__()
        self.project = project
        self.folder = Path(folder)
        self.tags = dict(tags)
        self._runs: dict[str, Any] = {}  # trial id -> its live wandb Run (never pickled)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_runs": {}}  # Ray pickles callbacks; live runs stay here

    @tracking.guarded
    def log_trial_start(self, trial: Any) -> None:
        if trial.trial_id in self._runs:
            return  # Ray restarts a failed trial: the same run goes on
        self.folder.mkdir(parents=True, exist_ok=True)
        self._runs[trial.trial_id] = wandb.init(
            project=self.project,
            dir=str(self.folder),
            id=trial.trial_id,
            name=tracking.trial_dirname(trial),
            group=self.tags.get("experiment"),
            config=dict(trial.config),
            tags=[f"{key}: {value}"[:64] for key, value in self.tags.items()],
            resume="allow",  # a resumed search goes on in the trial's run
            reinit="create_new",  # trials run side by side: one run each
            settings=_settings(),
        )

    @tracking.guarded
    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        run = self._runs.get(trial.trial_id)
        step = self._new_step(trial, result)
        if run is None or step is None:
            return
        numbers = {
            key: value
            for key, value in tracking.metrics_only(result).items()
            if isinstance(value, int | float) and key != record.STEP
        }
        run.log(numbers, step=step)

    @tracking.guarded
    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        run = self._runs.pop(trial.trial_id, None)
        if run is None:
            return
        kind, error = self._outcome(trial, failed=failed)
        kept = (tag for tag in run.tags if not tag.startswith(_KIND_TAG))  # one, the last
        run.tags = (*kept, f"{_KIND_TAG}{kind}")  # (a search cut, then resumed, ends twice)
        run.summary[record.KIND] = kind
        if error:
            run.summary[record.ERROR] = error
        last = trial.last_result or {}
        if last.get(record.RETRIES):  # a retried trial: how often, and its last failure
            run.summary[record.RETRIES] = last[record.RETRIES]
            run.summary[record.LAST_ERROR] = last.get(record.LAST_ERROR, "")
        run.finish(exit_code=1 if record.optuna_state(kind) == "FAIL" else 0)

    @tracking.guarded
    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self.end_cut(trials)  # each trial the search's end cut: incomplete
        for trial_id in list(self._runs):  # anything else still open: closed as it is
            self._runs.pop(trial_id).finish()


def log_time_to_target(
    *,
    project: str,
    folder: Path,
    tags: Mapping[str, str],
    trials: Mapping[str, Mapping[str, Any]],
    runs: Mapping[str, tuple[str, str]],
) -> int:
    """Every trial's time to target into its own run's summary; how many runs got them. The
    ended run is opened again by its id (a new file of the same run, which ``wandb sync``
    syncs in order), repeating its tags, kind and exit code (``runs``: trial id -> folder name
    and kind), so that its last word is still its kind."""
    told = 0
    for trial_id, values in trials.items():
        if trial_id not in runs:
            continue  # no run of its own (a trial of a search that was not tracked by W&B)
        name, kind = runs[trial_id]
        run = wandb.init(
            project=project,
            dir=str(folder),
            id=trial_id,
            name=name,
            group=tags.get("experiment"),
            tags=[*(f"{k}: {v}"[:64] for k, v in tags.items()), f"{_KIND_TAG}{kind}"],
            resume="allow",
            reinit="create_new",
            settings=_settings(),
        )
        run.summary.update({key: value for key, value in values.items() if value is not None})
        run.finish(exit_code=1 if record.optuna_state(kind) == "FAIL" else 0)
        told += 1
    return told


def _settings() -> Any:
    return wandb.Settings(
        mode=os.environ.get("WANDB_MODE", "offline"),  # type: ignore[arg-type]
        silent=True,
        console="off",  # never capture the search's console (the trial lines)
        disable_git=True,
        save_code=False,
        x_disable_stats=True,  # no system metrics: the trials measure themselves
    )
