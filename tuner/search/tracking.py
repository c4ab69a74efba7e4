"""What the tools ML engineers already use see of a search: TensorBoard, MLflow, trial folders.

- TensorBoard is always on: Ray writes an event file into every trial folder. Here its x-axis is
  the training step that every report carries (:data:`~tuner.record.STEP`), not
  Ray's count of reports, and each step is written once: a trial's final report repeats the
  step of its last evaluation and is not plotted again.
- ``--mlflow URI`` (off by default, so nothing leaves the machine): Ray's MLflow logger makes
  one run per trial (its config as params, its metrics by training step, tags ``space`` and
  ``experiment``), nested under one parent run per search in the MLflow experiment named after
  the search; :func:`log_report` adds the report's files to the parent run at the end.
- Trial folders are named ``t_<trial id>_<trial number>_<main settings>`` (:func:`trial_dirname`)
  instead of Ray's 120-character parameter strings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ray.air.constants import TRAINING_ITERATION
from ray.tune import Callback
from ray.tune.logger import TBXLoggerCallback
from ray.tune.result import AUTO_RESULT_KEYS, DONE, EXPERIMENT_TAG, SHOULD_CHECKPOINT, TRIAL_ID

from tuner.experiment import read_metadata
from tuner.record import STEP as STEP_KEY
from tuner.techniques import knob

__all__ = [
    "StepFilter",
    "StepTBXLoggerCallback",
    "log_report",
    "logger_callbacks",
    "metrics_only",
    "trial_dirname",
]

_RAY_KEYS = frozenset((*AUTO_RESULT_KEYS, DONE, SHOULD_CHECKPOINT, TRIAL_ID, EXPERIMENT_TAG))
# Not plotted: with one point per step, the final report (final=True) is never the one written.
_NOT_PLOTTED = _RAY_KEYS | {"final"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def logger_callbacks(*, mlflow_uri: str | None, experiment: str, space: str) -> list[Callback]:
    """The loggers a search adds to Ray's CSV and JSON ones: TensorBoard by training step (in
    place of Ray's default), and MLflow when a tracking URI is given."""
    callbacks: list[Callback] = [StepTBXLoggerCallback()]
    if mlflow_uri:  # imported only here: importing Ray's MLflow logger imports mlflow (~1 s)
        from tuner.search.mlflow_logger import StepMLflowLoggerCallback

        tags = {"space": Path(space).stem, "experiment": experiment}
        callbacks.append(
            StepMLflowLoggerCallback(mlflow_uri, experiment_name=experiment, tags=tags)
        )
    return callbacks


def trial_dirname(trial: Any) -> str:
    """``t_<trial id>_<number>_bs64_group4_bf16``: the trial's folder name (Ray's
    ``trial_dirname_creator``; module-level so Ray can pickle it)."""
    number = str(trial.experiment_tag or "").split("_", 1)[0]
    parts = ["t", str(trial.trial_id), *([number] if number.isdigit() else [])]
    return _UNSAFE.sub("-", "_".join([*parts, *_main_settings(trial.config)]))


def _main_settings(config: Mapping[str, Any]) -> list[str]:
    """The settings that change what a trial learns, short: batch size, norm, mixed precision."""
    settings = []
    if "batch_size" in config:
        settings.append(f"bs{config['batch_size']}")
    norm = config.get("norm")
    if norm is not None and norm != knob("norm").off:
        groups = config.get("gn_groups", "") if norm == "group" else ""
        settings.append(f"{norm}{groups}")
    amp = config.get("amp")
    if amp is not None and amp != knob("amp").off:
        settings.append(str(amp))
    return settings


class StepFilter:
    """Each trial's last written training step: a report at the same step is not written again
    (kept in Ray's experiment checkpoint, so a resumed search does not write it twice either)."""

    def __init__(self) -> None:
        self.last: dict[str, int] = {}  # trial id -> training step

    def new_step(self, trial: Any, result: Mapping[str, Any]) -> int | None:
        step = int(result.get(STEP_KEY) or 0)
        if self.last.get(trial.trial_id) == step:
            return None
        self.last[trial.trial_id] = step
        return step


def metrics_only(result: Mapping[str, Any]) -> dict[str, Any]:
    """A report without Ray's bookkeeping (iteration counters, timestamps, pid, config)."""
    return {key: value for key, value in result.items() if key not in _NOT_PLOTTED}


class StepTBXLoggerCallback(TBXLoggerCallback):
    """Ray's TensorBoard logger, plotting every scalar against the training step, once."""

    def __init__(self) -> None:
        super().__init__()
        self._steps = StepFilter()

    def get_state(self) -> dict[str, Any] | None:
        return {"steps": dict(self._steps.last)}

    def set_state(self, state: dict[str, Any]) -> None:
        self._steps.last = dict(state.get("steps", {}))

    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        step = self._steps.new_step(trial, result)
        if step is None:
            return
        # Ray's logger takes its global step from training_iteration (which it leaves out of
        # the scalars) when there is no timesteps_total: hand it the training step there.
        super().log_trial_result(
            iteration, trial, {**metrics_only(result), TRAINING_ITERATION: step}
        )


def log_report(experiment_dir: Path, report_dir: Path | None) -> str | None:
    """Add the report's files to the search's MLflow parent run and close it.

    Returns:
        ``"<tracking URI>, experiment <name>, run <id>"``, or ``None`` when the search was not
        tracked (no ``--mlflow``).
    """
    metadata = read_metadata(experiment_dir)
    uri = (metadata.get("options") or {}).get("mlflow")
    if not uri:
        return None
    from tuner.search.mlflow_logger import finish_parent_run

    experiment = str(metadata.get("name") or experiment_dir.name)
    tags = {"space": str(metadata.get("space")), "experiment": experiment}
    run_id = finish_parent_run(uri, experiment, tags=tags, artifacts=report_dir)
    return f"{uri}, experiment {experiment!r}, run {run_id}"
