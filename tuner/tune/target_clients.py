"""Every trial's time to target, told once the answer knows the target to the clients that ran
during the search, under the trials table's names (:data:`tuner.time_to_target.TARGET_COLUMNS`):
the Optuna study (a user attribute), TensorBoard (a ``time_to_target`` run beside each trial's
own) and each trial's own MLflow and W&B run when the search was tracked by them."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuner.answer import Answer
from tuner.errors import error_line
from tuner.experiment import STUDY_TIME_TO_TARGET_ATTR, Experiment
from tuner.record import KIND, TARGET_ACCURACY, TIME_TO_TARGET_SOURCE, TRIAL_DIR, TRIAL_ID
from tuner.time_to_target import TARGET_COLUMNS, rule_sentence
from tuner.units import as_number

__all__ = ["TENSORBOARD_RUN", "tell_time_to_target"]

TENSORBOARD_RUN = "time_to_target"  # the folder in each trial's folder


def tell_time_to_target(
    experiment: Experiment, answer: Answer, *, study_name: str, study_url: str
) -> None:
    """Write the time to target of every trial to the study, TensorBoard, and the MLflow and
    W&B runs of a search they tracked; each client on its own, so one that fails keeps none of
    the others from theirs, and costs a warning line (trials.csv and the report hold the same
    figures)."""
    if answer.target is None:
        return
    try:
        figures = figures_of(answer)
    except Exception as exc:
        print(f"warning: telling the time to target failed ({error_line(exc)}).")
        return
    options = experiment.metadata.get("options") or {}
    tells: dict[str, Callable[[], None]] = {
        "the study": lambda: _study(study_name, study_url, figures),
        "TensorBoard": lambda: _tensorboard(experiment, figures["trials"]),
    }
    if options.get("mlflow"):
        tells["MLflow"] = lambda: _mlflow(str(options["mlflow"]), experiment.name, figures)
    if options.get("wandb"):
        tells["W&B"] = lambda: _wandb(experiment, str(options["wandb"]), figures["trials"])
    for client, tell in tells.items():
        try:
            tell()
        except Exception as exc:
            print(f"warning: telling the time to target to {client} failed ({error_line(exc)}).")


def _study(study_name: str, study_url: str, figures: dict[str, Any]) -> None:
    import optuna

    study = optuna.load_study(study_name=study_name, storage=study_url)
    study.set_user_attr(STUDY_TIME_TO_TARGET_ATTR, figures)


def _mlflow(uri: str, name: str, figures: dict[str, Any]) -> None:
    from tuner.tune.mlflow_logger import log_time_to_target

    log_time_to_target(uri, name, figures["trials"])


def figures_of(answer: Answer) -> dict[str, Any]:
    """The study's record: the target, the rule, the pick and every trial's figures (JSON)."""
    target = answer.target
    assert target is not None
    trials = {
        str(row[TRIAL_ID]): {column: _json(row.get(column)) for column in TARGET_COLUMNS}
        for _, row in answer.trials.iterrows()
    }
    return {
        TARGET_ACCURACY: _json(target.accuracy),
        "rule": rule_sentence(target),
        "recommended": None if answer.rule is None else answer.rule.pick,
        "trials": trials,
    }


def _tensorboard(experiment: Experiment, trials: dict[str, dict[str, Any]]) -> None:
    from tensorboardX import SummaryWriter

    table = experiment.trials
    dirs = dict(zip(table[TRIAL_ID].astype(str), table[TRIAL_DIR], strict=True))
    for trial_id, values in trials.items():
        folder = dirs.get(trial_id)
        if not isinstance(folder, str) or not folder:
            continue
        with SummaryWriter(str(Path(experiment.path) / folder / TENSORBOARD_RUN)) as writer:
            for column, value in values.items():
                if column != TIME_TO_TARGET_SOURCE and value is not None:
                    writer.add_scalar(f"{TENSORBOARD_RUN}/{column}", value, 0)


def _wandb(experiment: Experiment, project: str, trials: dict[str, dict[str, Any]]) -> None:
    """Each trial's W&B run (offline, in the experiment folder) gets its figures."""
    from tuner.tune.wandb_logger import log_time_to_target

    table = experiment.trials
    runs = {
        str(row[TRIAL_ID]): (str(row[TRIAL_DIR]), str(row[KIND])) for _, row in table.iterrows()
    }
    space = Path(str(experiment.metadata.get("space"))).stem
    log_time_to_target(
        project=project,
        folder=Path(experiment.path),
        tags={"space": space, "experiment": experiment.name},
        trials=trials,
        runs=runs,
    )


def _json(value: Any) -> Any:
    """A JSON value: a finite number, a text, or None (missing)."""
    if isinstance(value, str):
        return value or None
    number = as_number(value)
    return number if math.isfinite(number) else None
