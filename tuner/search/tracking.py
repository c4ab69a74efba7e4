"""What TensorBoard sees of a search, and what every logger shares: trial folders, steps, kinds.

Every scalar is plotted against the training step (:data:`tuner.record.STEP`), each step once,
and a trial's kind and error text are written at its end: a scalar cannot say "stopped early".
The MLflow and W&B loggers import what they share from here, never the other way round.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ray.air.constants import TRAINING_ITERATION
from ray.tune.logger import TBXLoggerCallback
from ray.tune.result import AUTO_RESULT_KEYS, DONE, EXPERIMENT_TAG, SHOULD_CHECKPOINT, TRIAL_ID

from tuner import record
from tuner.errors import error_line
from tuner.techniques import knob

__all__ = [
    "StepLogger",
    "StepTBXLoggerCallback",
    "guarded",
    "metrics_only",
    "trial_dirname",
    "trial_outcome",
]

_RAY_KEYS = frozenset((*AUTO_RESULT_KEYS, DONE, SHOULD_CHECKPOINT, TRIAL_ID, EXPERIMENT_TAG))
# Not plotted: with one point per step, the final report (final=True) is never the one written.
_NOT_PLOTTED = _RAY_KEYS | {record.FINAL}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_TEXT_PREFIX = "ray/tune/"  # where Ray's TensorBoard logger writes a trial's scalars


def guarded(method: Callable[..., None]) -> Callable[..., None]:
    """A logger hook that never stops a search: the logger's first failure is one warning line
    on stderr naming its ``_client``, after which it logs nothing more (until its ``_failed``
    is set back to False)."""

    @functools.wraps(method)
    def hook(self: Any, *args: Any, **kwargs: Any) -> None:
        if self._failed:
            return
        try:
            method(self, *args, **kwargs)
        except Exception as exc:
            self._failed = True
            warning = (
                f"warning: {self._client} logging stopped ({error_line(exc)}); the search goes on."
            )
            print(warning, file=sys.stderr, flush=True)

    return hook


def trial_outcome(trial: Any, *, failed: bool) -> tuple[str, str]:
    """A trial that ended: its kind (:func:`tuner.record.classify` over its last report; Ray's
    ``failed`` is a crash) and its error text ("" when none)."""
    result = trial.last_result or {}
    kind = record.classify(result, ended=True, crashed=failed)
    return kind, str(result.get(record.ERROR) or "")


def trial_dirname(trial: Any) -> str:
    """``t_<trial id>_<number>_bs64_group4_bf16``: the trial's folder name (Ray's
    ``trial_dirname_creator``; module-level so Ray can pickle it)."""
    number = str(trial.experiment_tag or "").split("_", 1)[0]
    parts = ["t", str(trial.trial_id), *([number] if number.isdigit() else [])]
    return _UNSAFE.sub("-", "_".join([*parts, *_main_settings(trial.config)]))


def _main_settings(config: Mapping[str, Any]) -> list[str]:
    """The settings that change what a trial learns, short: batch size, norm, mixed precision."""
    settings = [f"bs{config['batch_size']}"] if "batch_size" in config else []
    norm, amp = config.get("norm"), config.get("amp")
    if norm == "group":
        settings.append(f"group{config.get('gn_groups', '')}")
    elif norm not in (None, knob("norm").off):
        settings.append(str(norm))
    if amp not in (None, knob("amp").off):
        settings.append(str(amp))
    return settings


class StepLogger:
    """A logger that writes each trial's training step once: a report at the step it last wrote
    is skipped. The steps live in Ray's experiment checkpoint, so a resumed search does not
    write one twice either."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._last_steps: dict[str, int] = {}  # trial id -> training step

    def _new_step(self, trial: Any, result: Mapping[str, Any]) -> int | None:
        step = int(result.get(record.STEP) or 0)
        if self._last_steps.get(trial.trial_id) == step:
            return None
        self._last_steps[trial.trial_id] = step
        return step

    def get_state(self) -> dict[str, Any] | None:
        return {"steps": dict(self._last_steps)}

    def set_state(self, state: dict[str, Any]) -> None:
        self._last_steps = dict(state.get("steps", {}))


def metrics_only(result: Mapping[str, Any]) -> dict[str, Any]:
    """A report without Ray's bookkeeping (iteration counters, timestamps, pid, config)."""
    return {key: value for key, value in result.items() if key not in _NOT_PLOTTED}


class StepTBXLoggerCallback(StepLogger, TBXLoggerCallback):
    """Ray's TensorBoard logger, plotting every scalar against the training step, once."""

    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        step = self._new_step(trial, result)
        if step is None:
            return
        # Ray's logger takes its global step from training_iteration (which it leaves out of
        # the scalars) when there is no timesteps_total: hand it the training step there.
        super().log_trial_result(
            iteration, trial, {**metrics_only(result), TRAINING_ITERATION: step}
        )

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        writer = self._trial_writer.get(trial)
        if writer is not None:
            kind, error = trial_outcome(trial, failed=failed)
            step = self._last_steps.get(trial.trial_id, 0)
            writer.add_text(_TEXT_PREFIX + record.KIND, kind, global_step=step)
            if error:
                writer.add_text(_TEXT_PREFIX + record.ERROR, error, global_step=step)
        super().log_trial_end(trial, failed)
