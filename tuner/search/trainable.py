"""The function trainable: one Ray Tune trial = a feasibility probe, then one engine run.

Every ``tune.report`` carries the same keys (see :mod:`tuner.search.metrics`). Each evaluation
checkpoints ``Progress.state_dict()`` (``torch.save``; read back with ``weights_only=True``) so a
trial that Ray restarts (node loss, ``--resume``) continues where it stopped; the final report
checkpoints the final metrics too, so a finished trial is never trained again.
"""

from __future__ import annotations

import gc
import json
import logging
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from ray import tune

from tuner.config import TrainConfig
from tuner.engine import Progress, probe, read_state_file, train, write_state_file
from tuner.errors import TunerError
from tuner.search.metrics import trial_metrics

__all__ = ["TrialContext", "run_trial", "train_config_of"]

STATE_FILE = "engine_state.pt"
META_FILE = "trial_meta.json"


@dataclass(frozen=True)
class TrialContext:
    """What every trial of one search shares, besides its sampled config."""

    max_memory_bytes: int | None
    probe_steps: int
    threads: int  # torch intra-op threads: the trial's CPU share
    device: str  # "cpu" for a trial without a GPU, else "auto"
    search_only: tuple[str, ...] = ()  # suggested names that are no run setting (base_lr)


def train_config_of(
    config: dict[str, Any], *, device: str = "auto", search_only: tuple[str, ...] = ()
) -> TrainConfig:
    """The trial's ``TrainConfig``: its settings, the search-only parameters dropped by name."""
    params = {**config, **({"device": "cpu"} if device == "cpu" else {})}
    return TrainConfig.from_params(params, ignore=search_only)


def run_trial(config: dict[str, Any], *, context: TrialContext) -> None:
    """Ray Tune function trainable (use with ``tune.with_parameters(run_trial, context=...)``)."""
    torch.set_num_threads(max(1, context.threads))
    logging.getLogger("ray.train").setLevel(logging.WARNING)  # one line per checkpoint
    trial = _TrialRun(context)
    try:
        trial.run(config)
    except Exception as exc:
        # Bad input (TunerError) or an engine bug: record it, then let Ray mark the trial ERROR.
        trial.report_error(exc)
        raise
    finally:
        gc.collect()  # finalize loaders now, not while Ray's SIGTERM ends the worker


class _TrialRun:
    """One trial's state between reports: cumulative engine time and the last metrics."""

    def __init__(self, context: TrialContext) -> None:
        self.context = context
        self.engine_time_s = 0.0
        self.node = _node()

    def run(self, config: dict[str, Any]) -> None:
        train_config = train_config_of(
            config, device=self.context.device, search_only=self.context.search_only
        )
        state, meta = _restore()
        self.engine_time_s = meta.get("engine_time_s", 0.0)
        if "final_metrics" in meta:  # finished before the driver stopped: report, don't retrain
            tune.report(meta["final_metrics"])
            return
        if state is None:
            start = time.perf_counter()
            probed = probe(train_config, steps=self.context.probe_steps)
            self.engine_time_s += time.perf_counter() - start
            metrics = self._metrics(probed, phase="probe", final=True)
            if not metrics["feasible"]:  # rejected in seconds, recorded with its measurement
                self._report(metrics, state=None, final=True)
                return
        start = time.perf_counter()
        result = train(
            train_config, on_eval=self._on_eval(start), resume_state=state, progress_bar=False
        )
        self.engine_time_s += time.perf_counter() - start
        self._report(self._metrics(result, phase="train", final=True), state=None, final=True)

    def report_error(self, exc: Exception) -> None:
        error = f"{type(exc).__name__}: {exc}" if not isinstance(exc, TunerError) else str(exc)
        failed = {"status": "error", "error": error.splitlines()[0][:500] if error else ""}
        tune.report(self._metrics(failed, phase="setup", final=True))

    def _on_eval(self, start: float) -> Any:
        def on_eval(progress: Progress) -> None:
            elapsed = self.engine_time_s + time.perf_counter() - start
            metrics = trial_metrics(
                progress.metrics,
                max_memory_bytes=self.context.max_memory_bytes,
                phase="train",
                node=self.node,
                engine_time_s=elapsed,
                final=False,
            )
            self._report(metrics, state=progress.state_dict(), engine_time_s=elapsed)

        return on_eval

    def _metrics(self, result: Any, *, phase: str, final: bool) -> dict[str, Any]:
        return trial_metrics(
            result,
            max_memory_bytes=self.context.max_memory_bytes,
            phase=phase,
            node=self.node,
            engine_time_s=self.engine_time_s,
            final=final,
        )

    def _report(
        self,
        metrics: dict[str, Any],
        *,
        state: dict[str, Any] | None,
        final: bool = False,
        engine_time_s: float | None = None,
    ) -> None:
        meta: dict[str, Any] = {"engine_time_s": engine_time_s or self.engine_time_s}
        if final:
            meta["final_metrics"] = metrics
        with tempfile.TemporaryDirectory(prefix="tuner-ckpt-") as folder:
            if state is not None:
                write_state_file(state, Path(folder) / STATE_FILE)
            (Path(folder) / META_FILE).write_text(json.dumps(meta))
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(folder))


def _restore() -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The engine state and metadata of the trial's latest checkpoint (None, {} if none)."""
    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        return None, {}
    with checkpoint.as_directory() as folder:
        state_path, meta_path = Path(folder) / STATE_FILE, Path(folder) / META_FILE
        state = read_state_file(state_path) if state_path.exists() else None
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    return state, meta


def _node() -> str:
    try:
        from tuner.search.cluster import node_address

        return node_address()
    except Exception:  # outside a Ray worker (unit use): the host name is still useful
        import socket

        return socket.gethostname()
