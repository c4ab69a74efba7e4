"""The loggers a search adds to Ray's CSV and JSON ones: TensorBoard always, MLflow and W&B on
request (``--mlflow URI``, ``--wandb PROJECT``; off by default, so nothing leaves the machine).

The optional loggers are imported only when asked for: each imports its client (~1 s).
"""

from __future__ import annotations

from pathlib import Path

from ray.tune import Callback

from tuner.search.tracking import StepTBXLoggerCallback

__all__ = ["logger_callbacks"]


def logger_callbacks(
    *,
    mlflow_uri: str | None,
    wandb_project: str | None,
    experiment: str,
    space: str,
    experiment_dir: Path,
) -> list[Callback]:
    """TensorBoard by training step (in place of Ray's default), MLflow when a tracking URI is
    given, W&B (offline files in ``experiment_dir``) when a project is."""
    callbacks: list[Callback] = [StepTBXLoggerCallback()]
    tags = {"space": Path(space).stem, "experiment": experiment}
    if mlflow_uri:
        from tuner.search.mlflow_logger import StepMLflowLoggerCallback

        callbacks.append(
            StepMLflowLoggerCallback(mlflow_uri, experiment_name=experiment, tags=tags)
        )
    if wandb_project:
        from tuner.search.wandb_logger import WandbOfflineCallback

        callbacks.append(
            WandbOfflineCallback(project=wandb_project, folder=experiment_dir, tags=tags)
        )
    return callbacks
