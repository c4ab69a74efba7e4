"""What TensorBoard sees of a search, and what every logger shares: trial folders, steps, kinds.
Every scalar is plotted against the training step, each step once, and a trial's kind is
written at its end (a scalar cannot say "stopped early").
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import re
import sys
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from ray.air.constants import TRAINING_ITERATION
from ray.tune import Callback
from ray.tune.logger import TBXLoggerCallback
from ray.tune.result import AUTO_RESULT_KEYS, DONE, EXPERIMENT_TAG, SHOULD_CHECKPOINT, TRIAL_ID

from tuner import record
from tuner.errors import error_line
from tuner.experiment import CUT_FILE, CUT_STARTED_UNIX_S, CUT_UNIX_S
from tuner.techniques import knob

__all__ = [
    "SearchEndCut",
    "StepLogger",
    "StepTBXLoggerCallback",
    "cut_at_end",
    "cut_results",
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
_log = logging.getLogger(__name__)


def guarded(method: Callable[..., None]) -> Callable[..., None]:
    """A logger hook that never stops a search: the first failure is one warning line naming
    ``_client``, after which the logger logs nothing (until ``_failed`` is reset)."""

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


def trial_outcome(trial: Any, *, failed: bool, cut: bool = False) -> tuple[str, str]:
    """An ended trial's kind and error text (``cut``: the search's end stopped it, so it ended
    only if its last report was final)."""
    result = trial.last_result or {}
    ended = not cut or result.get(record.FINAL) is True
    kind = record.classify(result, ended=ended, crashed=failed)
    return kind, str(result.get(record.ERROR) or "")


class SearchEndCut(Callback):
    """Marks each trial the search's end stopped with :data:`~tuner.experiment.CUT_FILE`, so
    that the reader calls it incomplete: Ray ends it TERMINATED, as if a scheduler had, and
    tells neither the searcher nor the loggers."""

    def __init__(self) -> None:
        self._started: dict[str, float] = {}  # trial id -> when it started (Unix seconds)
        self._ended: set[str] = set()

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._started[trial.trial_id] = time.time()
        self._ended.discard(trial.trial_id)
        with contextlib.suppress(FileNotFoundError, OSError):
            trial.storage.storage_filesystem.delete_file(f"{trial.path}/{CUT_FILE}")

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._ended.add(trial.trial_id)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._ended.add(trial.trial_id)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        cut = cut_at_end(trials, started=self._started, ended=self._ended)
        now = time.time()
        for trial in cut:  # in the trial's folder, where Ray keeps it; with its clock, for a
            # trial cut before its first report has no other record of when it ran
            filesystem = trial.storage.storage_filesystem
            stamps = {CUT_STARTED_UNIX_S: self._started[trial.trial_id], CUT_UNIX_S: now}
            with filesystem.open_output_stream(f"{trial.path}/{CUT_FILE}") as out:
                out.write(json.dumps({record.TRIAL_ID: trial.trial_id, **stamps}).encode())


def cut_at_end(trials: list, *, started: Collection[str], ended: Collection[str]) -> list[Any]:
    """The trials that started but had not ended when the experiment did."""
    return [
        trial
        for trial in trials
        if trial.trial_id in started
        and trial.trial_id not in ended
        and (trial.last_result or {}).get(record.FINAL) is not True
    ]


def cut_results(trials: list) -> dict[str, dict[str, Any]]:
    return {
        trial.trial_id: dict(trial.last_result or {})
        for trial in trials
        if trial.path and (Path(trial.path) / CUT_FILE).is_file()
    }


def trial_dirname(trial: Any) -> str:
    """``t_<trial id>_<number>_bs64_group4_bf16`` (Ray's ``trial_dirname_creator``)."""
    number = str(trial.experiment_tag or "").split("_", 1)[0]
    parts = ["t", str(trial.trial_id), *([number] if number.isdigit() else [])]
    return _UNSAFE.sub("-", "_".join([*parts, *_main_settings(trial.config)]))


def _main_settings(config: Mapping[str, Any]) -> list[str]:
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
    """A logger that writes each trial's training step once, a resumed search's too (the steps
    live in Ray's experiment checkpoint)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._last_steps: dict[str, int] = {}  # trial id -> training step
        self._open: set[str] = set()  # trials that started and have not ended here
        self._cut: set[str] = set()  # trials the search's end stopped half-way

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        """Open from its start: a trial cut before its first report is ended too."""
        self._open.add(trial.trial_id)
        super().on_trial_start(iteration, trials, trial, **info)  # type: ignore[misc]

    def _new_step(self, trial: Any, result: Mapping[str, Any]) -> int | None:
        self._open.add(trial.trial_id)
        step = int(result.get(record.STEP) or 0)
        if self._last_steps.get(trial.trial_id) == step:
            return None
        self._last_steps[trial.trial_id] = step
        return step

    def _outcome(self, trial: Any, *, failed: bool) -> tuple[str, str]:
        self._open.discard(trial.trial_id)
        return trial_outcome(trial, failed=failed, cut=trial.trial_id in self._cut)

    def end_cut(self, trials: list) -> None:
        """End each trial still open: Ray calls no ``log_trial_end`` for a cut one."""
        for trial in trials:
            if trial.trial_id in self._open:
                self._cut.add(trial.trial_id)
                self.log_trial_end(trial, failed=False)  # type: ignore[attr-defined]

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self.end_cut(trials)
        super().on_experiment_end(trials, **info)  # type: ignore[misc]

    def get_state(self) -> dict[str, Any] | None:
        return {"steps": dict(self._last_steps)}

    def set_state(self, state: dict[str, Any]) -> None:
        self._last_steps = dict(state.get("steps", {}))


def metrics_only(result: Mapping[str, Any]) -> dict[str, Any]:
    """A report without Ray's bookkeeping and without NaN: no client shows an unmeasured value."""
    return {
        key: value
        for key, value in result.items()
        if key not in _NOT_PLOTTED and not (isinstance(value, float) and math.isnan(value))
    }


class StepTBXLoggerCallback(StepLogger, TBXLoggerCallback):
    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        step = self._new_step(trial, result)
        if step is None:
            return
        # Ray's logger takes its global step from training_iteration (which it leaves out of
        # the scalars) when there is no timesteps_total: hand it the training step there.
        super().log_trial_result(
            iteration, trial, {**metrics_only(result), TRAINING_ITERATION: step}
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._kinds: dict[str, str] = {}  # trial id -> kind, from its end to its hparams

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        writer = self._trial_writer.get(trial)
        if writer is not None:
            kind, error = self._outcome(trial, failed=failed)
            self._kinds[trial.trial_id] = kind
            if not self._trial_result.get(trial):  # a retry that raised before it reported
                self._trial_result[trial] = _numbers(trial.last_result or {})
            if not self._trial_result[trial]:  # cut before its first report: its status still
                self._try_log_hparams(trial, {})  # (Ray's logger skips a trial without one)
            step = self._last_steps.get(trial.trial_id, 0)
            writer.add_text(_TEXT_PREFIX + record.KIND, kind, global_step=step)
            if error:
                writer.add_text(_TEXT_PREFIX + record.ERROR, error, global_step=step)
        super().log_trial_end(trial, failed)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        super().on_experiment_end(trials, **info)  # StepLogger's: the cut trials ended here
        for trial in trials:
            if trial.trial_id in self._cut:
                _persist_events(trial)

    def _try_log_hparams(self, trial: Any, result: dict[str, Any]) -> None:
        """Ray's HParams summary with the status from the kind (tensorboardX marks all SUCCESS)."""
        from ray.tune.utils import flatten_dict
        from tensorboardX.summary import hparams

        valid = self.VALID_HPARAMS + self.VALID_NP_HPARAMS  # what Ray's own method keeps
        params = {
            key: value.tolist() if isinstance(value, self.VALID_NP_HPARAMS) else value
            for key, value in flatten_dict(trial.evaluated_params).items()
            if isinstance(value, valid)
        }
        status = record.hparams_status(self._kinds.pop(trial.trial_id, "incomplete"))
        try:
            summaries = hparams(hparam_dict=params, metric_dict=result)
            _set_status(summaries[2], status)
            for summary in summaries:
                self._trial_writer[trial].file_writer.add_summary(summary)
        except Exception:  # as Ray's: a value TensorBoard cannot hold costs the tab, not the run
            _log.exception("TensorboardX failed to log hparams.")


def _persist_events(trial: Any) -> None:
    """A cut trial's TensorBoard files into its stored folder: Ray's last sync ran before them."""
    staging, stored = trial.local_path, trial.path
    if not staging or not stored or Path(staging) == Path(stored):
        return
    filesystem = trial.storage.storage_filesystem
    filesystem.create_dir(stored, recursive=True)  # a trial cut before its first report
    for events in Path(staging).glob("events.out.tfevents.*"):
        with filesystem.open_output_stream(f"{stored}/{events.name}") as out:
            out.write(events.read_bytes())


def _numbers(result: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: value
        for key, value in metrics_only(result).items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }


def _set_status(session_end: Any, status: str) -> None:
    from tensorboardX.proto.api_pb2 import Status
    from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData

    plugin = session_end.value[0].metadata.plugin_data
    data = HParamsPluginData.FromString(plugin.content)
    data.session_end_info.status = Status.Value(status)
    plugin.content = data.SerializeToString()
