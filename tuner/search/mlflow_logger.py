"""``--mlflow URI``: Ray's MLflow logger by training step, and the search's parent run.

Imported only when a search is tracked: importing Ray's MLflow logger imports ``mlflow``.
Every trial is one MLflow run (params: its config; metrics: every report at its training step;
tags: ``space``, ``experiment``, ``trial_name``) nested under one parent run per search, in the
MLflow experiment named after the search. The parent run gets the report's files at the end.

MLflow never stops a search: the URI is tried before any trial runs (:func:`check_tracking_uri`),
and a store that fails later costs one warning line, after which the search goes on untracked.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from ray.air.integrations.mlflow import MLflowLoggerCallback

from tuner.errors import TunerError
from tuner.search.tracking import StepFilter, metrics_only

__all__ = [
    "PARENT_RUN_TAG",
    "StepMLflowLoggerCallback",
    "check_tracking_uri",
    "finish_parent_run",
    "parent_run",
]

# Marks the parent run of a search in its MLflow experiment (the trial runs are its children).
PARENT_RUN_TAG = "tuner.parent"
_MLFLOW_PARENT_RUN_ID = "mlflow.parentRunId"  # MLflow's own tag for a nested run


class StepMLflowLoggerCallback(MLflowLoggerCallback):
    """Ray's MLflow logger with the training step as MLflow's step (once per step) and every
    trial run nested under the search's parent run."""

    def __init__(self, tracking_uri: str, *, experiment_name: str, tags: dict[str, str]) -> None:
        super().__init__(tracking_uri, experiment_name=experiment_name, tags=tags)
        self._steps = StepFilter()
        self._failed = False
        self._run_ids: dict[str, str] = {}  # trial id -> MLflow run id, across --resume

    def get_state(self) -> dict[str, Any] | None:
        """What Ray keeps in its experiment checkpoint: a resumed search goes on in the same
        MLflow runs, without writing a step twice."""
        runs = {
            trial.trial_id: run_id for trial, run_id in getattr(self, "_trial_runs", {}).items()
        }
        return {"steps": dict(self._steps.last), "runs": {**self._run_ids, **runs}}

    def set_state(self, state: dict[str, Any]) -> None:
        self._steps.last = dict(state.get("steps", {}))
        self._run_ids = dict(state.get("runs", {}))

    def setup(self, *args: Any, **kwargs: Any) -> None:
        self._failed = False  # a resumed search tries again
        self._guarded(self._setup, *args, **kwargs)

    def log_trial_start(self, trial: Any) -> None:
        self._guarded(self._start, trial)

    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        self._guarded(self._log_result, trial, result)

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        self._guarded(super().log_trial_end, trial, failed)

    def _setup(self, *args: Any, **kwargs: Any) -> None:
        super().setup(*args, **kwargs)
        parent = parent_run(self.tracking_uri, str(self.experiment_name), dict(self.tags or {}))
        self.tags = {**(self.tags or {}), _MLFLOW_PARENT_RUN_ID: parent}

    def _start(self, trial: Any) -> None:
        if trial not in self._trial_runs and trial.trial_id in self._run_ids:
            self._trial_runs[trial] = self._run_ids[trial.trial_id]  # its run before --resume
        super().log_trial_start(trial)

    def _log_result(self, trial: Any, result: dict[str, Any]) -> None:
        step = self._steps.new_step(trial, result)
        if step is not None:
            self.mlflow_util.log_metrics(
                run_id=self._trial_runs[trial], metrics_to_log=metrics_only(result), step=step
            )

    def _guarded(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Run ``method``; the first failure is one warning line and ends MLflow logging."""
        if self._failed:
            return
        try:
            method(*args, **kwargs)
        except Exception as exc:
            self._failed = True
            line = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            warning = f"warning: MLflow logging stopped ({line}); the search goes on."
            print(warning, file=sys.stderr, flush=True)


def check_tracking_uri(tracking_uri: str) -> None:
    """Reach the tracking store once, with no retries (a search must not start untracked).

    Raises:
        TunerError: the store cannot be reached or opened.
    """
    quick = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
    saved = {key: os.environ.get(key) for key in quick}
    os.environ.update(quick)
    try:
        MlflowClient(tracking_uri).search_experiments(max_results=1)
    except Exception as exc:
        line = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        raise TunerError(
            f"--mlflow {tracking_uri}: the tracking store cannot be reached ({line}); check the "
            "URI (sqlite:///mlflow.db, http://host:5000) or start the server."
        ) from None
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def parent_run(tracking_uri: str, experiment: str, tags: dict[str, str]) -> str:
    """The id of the search's parent run, made on first use (a resumed search finds it)."""
    client = MlflowClient(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found else client.create_experiment(experiment)
    runs = client.search_runs([experiment_id], filter_string=f"tags.`{PARENT_RUN_TAG}` = 'true'")
    if runs:
        return runs[0].info.run_id
    run = client.create_run(
        experiment_id, run_name=experiment, tags={**tags, PARENT_RUN_TAG: "true"}
    )
    return run.info.run_id


def finish_parent_run(
    tracking_uri: str, experiment: str, *, tags: dict[str, str], artifacts: Path | None
) -> str:
    """Log the files of ``artifacts`` (the report folder) to the parent run, mark it finished,
    and return its id."""
    run_id = parent_run(tracking_uri, experiment, tags)
    client = MlflowClient(tracking_uri)
    if artifacts is not None and artifacts.is_dir():
        client.log_artifacts(run_id, str(artifacts))
    client.set_terminated(run_id, "FINISHED")
    return run_id
