"""``--mlflow URI``: Ray's MLflow logger by training step, each trial's run nested under the
search's parent run, which gets the recommendation and the report at the end (README, "MLflow").
The URI is tried before any trial runs; a store that fails later costs one warning line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag
from ray.air.integrations.mlflow import MLflowLoggerCallback

from tuner import record
from tuner.errors import TunerError, error_line
from tuner.tune import tracking
from tuner.units import finite_or_none

if TYPE_CHECKING:
    from tuner.answer import Answer
    from tuner.experiment import Experiment

__all__ = [
    "StepMLflowLoggerCallback",
    "check_tracking_uri",
    "log_report",
    "log_time_to_target",
]

# Marks the parent run of a search in its MLflow experiment (the trial runs are its children).
_PARENT_RUN_TAG = "tuner.parent"
_MLFLOW_PARENT_RUN_ID = "mlflow.parentRunId"  # MLflow's own tag for a nested run
_RECOMMENDED = "recommended"  # prefix of the parent run's params and metrics of the pick
_TAG_CHARS = 5000  # MLflow's limit on a tag value


class StepMLflowLoggerCallback(tracking.StepLogger, MLflowLoggerCallback):
    _client, _failed = "MLflow", False  # for tracking.guarded

    def __init__(self, tracking_uri: str, *, experiment_name: str, tags: dict[str, str]) -> None:
        super().__init__(tracking_uri, experiment_name=experiment_name, tags=tags)
        self._run_ids: dict[str, str] = {}  # trial id -> MLflow run id, across --resume

    def get_state(self) -> dict[str, Any] | None:
        """Kept in Ray's experiment checkpoint: a resumed search goes on in the same runs."""
        runs = {
            trial.trial_id: run_id for trial, run_id in getattr(self, "_trial_runs", {}).items()
        }
        return {**(super().get_state() or {}), "runs": {**self._run_ids, **runs}}

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self._run_ids = dict(state.get("runs", {}))

    def setup(self, *args: Any, **kwargs: Any) -> None:
        self._failed = False  # a resumed search tries again
        self._setup(*args, **kwargs)

    @tracking.guarded
    def _setup(self, *args: Any, **kwargs: Any) -> None:
        super().setup(*args, **kwargs)
        parent = _parent_run(self.tracking_uri, str(self.experiment_name), dict(self.tags or {}))
        self.tags = {**(self.tags or {}), _MLFLOW_PARENT_RUN_ID: parent}

    @tracking.guarded
    def log_trial_start(self, trial: Any) -> None:
        if trial not in self._trial_runs and trial.trial_id in self._run_ids:
            self._trial_runs[trial] = self._run_ids[trial.trial_id]  # its run before --resume
        super().log_trial_start(trial)

    @tracking.guarded
    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        step = self._new_step(trial, result)
        if step is not None:
            self.mlflow_util.log_metrics(
                run_id=self._trial_runs[trial],
                metrics_to_log=tracking.metrics_only(result),
                step=step,
            )

    @tracking.guarded
    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        kind, error = self._outcome(trial, failed=failed)
        tags = {record.KIND: kind, **({record.ERROR: error[:_TAG_CHARS]} if error else {})}
        if (trial.last_result or {}).get(record.RETRIES):  # its count is a metric already
            tags[record.LAST_ERROR] = str(trial.last_result[record.LAST_ERROR])[:_TAG_CHARS]
        client = MlflowClient(self.tracking_uri)
        for key, value in tags.items():
            client.set_tag(self._trial_runs[trial], key, value)
        super().log_trial_end(trial, failed=record.optuna_state(kind) == "FAIL")
        if kind == "incomplete":  # cut by the search's end: MLflow's word for a run stopped
            client.set_terminated(self._trial_runs[trial], "KILLED")


def check_tracking_uri(tracking_uri: str) -> None:
    """Reach the tracking store once, with no retries: a search must not start untracked.

    Raises:
        TunerError: the store cannot be reached or opened.
    """
    quick = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
    saved = {key: os.environ.get(key) for key in quick}
    os.environ.update(quick)
    try:
        MlflowClient(tracking_uri).search_experiments(max_results=1)
    except Exception as exc:
        raise TunerError(
            f"--mlflow {tracking_uri}: the tracking store cannot be reached ({error_line(exc)}); "
            "check the URI (sqlite:///mlflow.db, http://host:5000) or start the server."
        ) from None
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _parent_run(tracking_uri: str, experiment: str, tags: dict[str, str]) -> str:
    client = MlflowClient(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found else client.create_experiment(experiment)
    runs = client.search_runs([experiment_id], filter_string=f"tags.`{_PARENT_RUN_TAG}` = 'true'")
    if runs:
        return runs[0].info.run_id
    run = client.create_run(
        experiment_id, run_name=experiment, tags={**tags, _PARENT_RUN_TAG: "true"}
    )
    return run.info.run_id


def log_report(
    tracking_uri: str, experiment: Experiment, answer: Answer, report_dir: Path | None
) -> str:
    """Close the search's parent run with the recommended trial (its id as a tag, its numbers
    as metrics, its config as params, ``recommended.<name>``) and the report's files; return
    where, for the console."""
    pick = answer.recommended
    space = Path(str(experiment.metadata.get("space"))).stem
    run_id = _parent_run(
        tracking_uri, experiment.name, {"space": space, "experiment": experiment.name}
    )
    client = MlflowClient(tracking_uri)
    if pick is not None:
        trial_id = str(pick[record.TRIAL_ID])
        client.set_tag(run_id, f"{_RECOMMENDED}.{record.TRIAL_ID}", trial_id)
        config = experiment.configs[trial_id]
        params = [Param(f"{_RECOMMENDED}.{k}", str(v)[:_TAG_CHARS]) for k, v in config.items()]
        client.log_batch(run_id, metrics=_figures(pick.to_dict()), params=params)
    if report_dir is not None and report_dir.is_dir():
        client.log_artifacts(run_id, str(report_dir))
    client.set_terminated(run_id, "FINISHED")
    return f"{tracking_uri}, experiment {experiment.name!r}, run {run_id}"


def log_time_to_target(
    tracking_uri: str, experiment_name: str, trials: Mapping[str, Mapping[str, Any]]
) -> int:
    """Every trial's time to target into its own (ended) run: numbers as metrics at step 0,
    texts as tags; how many runs got them."""
    client = MlflowClient(tracking_uri)
    found = client.get_experiment_by_name(experiment_name)
    if found is None:
        return 0
    runs = client.search_runs([found.experiment_id])
    by_trial = {
        str(run.data.tags.get("trial_name", "")).rsplit("_", 1)[-1]: run.info.run_id
        for run in runs
        if _MLFLOW_PARENT_RUN_ID in run.data.tags
    }
    told = 0
    for trial_id, values in trials.items():
        run_id = by_trial.get(trial_id)
        if run_id is None:
            continue
        numbers = {k: v for k, v in values.items() if isinstance(v, int | float)}
        texts = {k: str(v)[:_TAG_CHARS] for k, v in values.items() if isinstance(v, str)}
        metrics = [Metric(key, float(value), 0, 0) for key, value in numbers.items()]
        client.log_batch(run_id, metrics=metrics, tags=[RunTag(k, v) for k, v in texts.items()])
        told += 1
    return told


def _figures(row: Mapping[str, Any]) -> list[Metric]:
    numbers = {name: finite_or_none(value) for name, value in row.items()}
    return [
        Metric(f"{_RECOMMENDED}.{name}", value, 0, 0)
        for name, value in numbers.items()
        if value is not None and not isinstance(row[name], bool | np.bool_)
    ]
