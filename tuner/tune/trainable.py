"""The function trainable: one Ray Tune trial = a speed choice, then one engine run.

1. Speed: the knobs the space did not pin, settled by speed probes (the probe cache first).
2. The run (:func:`tuner.engine.train`); its first steps are the feasibility check
   (over the memory budget: ``phase="feasibility"``, infeasible).
3. Every evaluation reports; the first, then one every ``--checkpoint-every-s`` at most,
   checkpoints too (a checkpoint at every evaluation cost millisecond steps 6-9 points of
   their time: bench/data_parallel_overhead.py); the final report too, so a finished trial is
   never trained again.

Tune retries every exception alike, so a ``TunerError`` (deterministic) is reported with a
checkpoint that marks it final, from which each retry raises at once; anything else is retried
from the last checkpoint. A run the engine ended with ``status="error"`` is reported as final,
then raised, so that Ray ends the trial as ``ERROR`` too.
"""

from __future__ import annotations

import gc
import json
import logging
import math
import os
import socket
import tempfile
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import pyarrow.fs
import ray
import torch
from ray import tune

from tuner import record
from tuner.config import TrainConfig
from tuner.engine import (
    Progress,
    RunResult,
    prepare,
    read_state_file,
    train,
    write_state_file,
)
from tuner.engine.build import resolve_device
from tuner.engine.meters import environment
from tuner.errors import TunerError, error_line
from tuner.experiment import RUN_TRACEBACK_FILE
from tuner.measure.load import LOADED_CORES, LoadMeter, load_text
from tuner.objectives import judge
from tuner.spaces import train_config_of
from tuner.speed import SpeedChoice
from tuner.speed.budget import run_cost
from tuner.speed.machine_cache import this_machine
from tuner.speed.session import Settled, TrialSpeed, settle_speed
from tuner.techniques import accuracy_neutral_fields
from tuner.tune.phases import PhaseLog
from tuner.tune.retries import read_retries
from tuner.tune.trials_actor import ActorStore, TrialStore
from tuner.usercode import restore

__all__ = ["TrialContext", "TrialCounters", "allow_slow_trial_exit", "run_trial"]

logger = logging.getLogger(__name__)

STATE_FILE = "engine_state.pt"
META_FILE = "trial_meta.json"


@dataclass(frozen=True)
class TrialContext:
    """What every trial of one search shares, besides its sampled config."""

    max_memory_bytes: int | None
    probe_steps: int  # measured steps of each speed-probe run
    threads: int  # torch intra-op threads: the trial's CPU share
    device: str  # "cpu" for a trial without a GPU, else "auto"
    search_only: tuple[str, ...]  # suggested names that are no run setting (base_lr)
    speed_repeats: int  # interleaved repeats of the speed probes (0: no probes)
    actor_namespace: str  # where the trials' actor lives ("": none)
    # The notebook objects the run's model/data name (``@name``): carried by value to workers.
    user_objects: dict[str, Any] = field(default_factory=dict)
    cores: int = 1  # the trial's CPUs: the loader worker levels its speed probes try
    checkpoint_every_s: float = 0.0  # SearchOptions.checkpoint_every_s (0: every evaluation)
    feasibility_steps: int = 5  # measured steps before the feasibility check
    # Of the trials' time the speed probes may take (tuner.speed.budget); None: no bound.
    probe_share: float | None = 0.2


def run_trial(config: dict[str, Any], *, context: TrialContext) -> None:
    """Ray Tune function trainable (use with ``tune.with_parameters(run_trial, context=...)``)."""
    allow_slow_trial_exit()
    _run(_TrialRun(context, ActorStore(context.actor_namespace, _trial_id())), config)


def allow_slow_trial_exit(seconds: int = 60) -> None:
    """Give a stopped trial's thread ``seconds`` to end before Ray reuses its process: past
    ``TUNE_FUNCTION_THREAD_TIMEOUT_S`` (2 s by default) Ray 2.60 ends the next trial as ERROR
    without telling the searcher, whose concurrency limit then never frees the slot, and a
    stopped trial's gc and loader shutdown take seconds on a busy machine."""
    os.environ.setdefault("TUNE_FUNCTION_THREAD_TIMEOUT_S", str(seconds))


def _run(trial: _TrialRun, config: dict[str, Any]) -> None:
    """One trial's run and its error policy (also each worker's, in tuner.tune.ddp_trial)."""
    torch.set_num_threads(max(1, trial.context.threads))
    logging.getLogger("ray.train").setLevel(logging.WARNING)  # one line per checkpoint
    checkpoint = trial._latest_checkpoint()
    raise_if_ended(checkpoint)  # reported before as final: a retry must not train
    try:
        trial.run(config, checkpoint)
    except _ReportedError:  # the engine's error, reported as final already
        raise
    except TunerError as exc:  # deterministic: a retry raises at once (above)
        trial.report_error(exc, final=True)
        raise
    except Exception as exc:  # an engine bug or a lost node: record it, let Ray retry
        trial.report_error(exc, final=False)
        raise
    finally:
        gc.collect()  # finalize loaders now, not while Ray reuses or ends the worker


class EndedBefore(TunerError):
    """An earlier attempt reported this error as final: every later attempt raises it at once."""


def raise_if_ended(checkpoint: Any) -> None:
    final = _restore(checkpoint, state=False)[1].get("final_report") or {}
    if final.get(record.STATUS) == "error":
        raise EndedBefore(str(final.get(record.ERROR) or "the trial failed before"))


class _ReportedError(TunerError):
    """The engine's error, reported as final: raised so that Ray ends the trial as ``ERROR``."""


def _kept(key: str, default: Any = None) -> Any:
    return field(default=default, metadata={"key": key})


@dataclass
class TrialCounters:
    """What a trial counts across its attempts: reported under their record keys, carried over
    a restart (with the speed choice) by each checkpoint."""

    started_unix_s: float = field(metadata={"key": record.TRIAL_STARTED_UNIX_S})  # the first's
    engine_time_s: float = _kept(record.ENGINE_TIME_S, 0.0)  # probes, builds, training, eval
    train_time_s: float = _kept(record.TRIAL_TRAIN_TIME_S, 0.0)  # the speed probes' steps too
    first_step_unix_s: float | None = _kept(record.TRIAL_FIRST_STEP_UNIX_S)
    speed_source: str = _kept(record.SPEED_SOURCE, "")
    speed_cache_age_s: float | None = _kept(record.SPEED_CACHE_AGE_S)  # an earlier search's
    probe_time_s: float = _kept(record.SPEED_PROBE_TIME_S, 0.0)  # its own (a cached verdict: 0)
    probe_wait_s: float = _kept(record.SPEED_PROBE_WAIT_S, 0.0)  # for another trial's probes
    probe_budget_s: float | None = _kept(record.SPEED_PROBE_BUDGET_S)
    speed: SpeedChoice | None = None  # a checkpoint holds it as a dict, under "speed"

    def reported(self) -> dict[str, Any]:
        return {f.metadata["key"]: getattr(self, f.name) for f in fields(self) if f.metadata}

    def meta(self) -> dict[str, Any]:
        return {**self.reported(), "speed": None if self.speed is None else self.speed.to_dict()}

    def carried_over(self, meta: dict[str, Any]) -> TrialCounters:
        """With what a checkpoint's ``meta`` carried (a missing key keeps its value)."""
        keys = {f.name: f.metadata["key"] for f in fields(self) if f.metadata}
        kept = {name: meta[key] for name, key in keys.items() if meta.get(key) is not None}
        speed = meta.get("speed")
        return replace(
            self, **kept, speed=self.speed if speed is None else SpeedChoice.from_dict(speed)
        )


class _TrialRun:
    """One trial's state between reports. Its Ray I/O is its store and two methods (``_emit``,
    ``_latest_checkpoint``) that a data-parallel rank replaces."""

    def __init__(self, context: TrialContext, store: TrialStore) -> None:
        restore(context.user_objects)
        self.context, self.store = context, store
        self.counters = TrialCounters(started_unix_s=time.time())
        self.rejected = False
        self.run_start = 0.0  # perf_counter when the engine run began
        self.node = _node()
        self.last_checkpoint: float | None = None  # perf_counter of the run's latest one
        self.probe_steps_s = 0.0  # in the training steps of this trial's own probes
        self.probe_runs = 0  # its probe runs this attempt (their "probe" lines in the phase log)
        self.starved_by = ""
        self.load = LoadMeter.start()  # other work on the machine while this trial runs
        self.machine_load_cores: float | None = None
        self.phases = PhaseLog(None, self.counters.started_unix_s)
        self.config: TrainConfig | None = None  # the trial's run config, once known
        self.cost_told = False  # its run's cost, told to the probe cache once (_tell_cost)
        self.restored = False  # this run resumed from a checkpoint
        self.retries, self.last_error = 0, ""  # its failed attempts before this one

    def run(self, config: dict[str, Any], checkpoint: Any) -> None:
        base = train_config_of(
            config, device=self.context.device, search_only=self.context.search_only
        )
        state, meta = _restore(checkpoint)
        self.restored = state is not None
        if "final_report" in meta:  # finished before the driver stopped: report, don't retrain
            self._emit(meta["final_report"], None)
            return
        counters = self.counters = self.counters.carried_over(meta)
        self.config = base
        self.phases = PhaseLog(self._trial_dir(), counters.started_unix_s)
        self.retries, self.last_error = read_retries(self._trial_dir())
        self._begun()
        if counters.speed is None:
            counters.speed, counters.speed_source = self._choose_speed(base, config)
        self.phases.write("train", event="start", settings=counters.speed.settings)
        self.run_start = time.perf_counter()
        result = train(
            base.replace(**counters.speed.settings),
            on_eval=self._on_eval,
            resume_state=state,
            on_feasibility=self._rejects,
            feasibility_steps=self.context.feasibility_steps,
        )
        counters.engine_time_s += time.perf_counter() - self.run_start
        if result.error_traceback:
            self._keep_traceback(result.error_traceback)
        counters.train_time_s += result.train_time_s
        if result.first_step_unix_s is not None:
            first = counters.first_step_unix_s or 1e18
            counters.first_step_unix_s = min(first, result.first_step_unix_s)
        self.machine_load_cores = self.load.other_cores()
        self.starved_by = self._starved_by(result)
        self.phases.write("train", event="end", **_run_parts(result))
        self._tell_cost(result)
        if self.context.probe_share is not None:  # its measured share, for the trials after it
            self.store.earn(self.context.probe_share * (time.time() - counters.started_unix_s))
        phase = "feasibility" if self.rejected else "train"
        self._send(self._report(result, phase=phase, final=True), state=None, final=True)
        if result.status == "error":  # Ray's status too: ERROR, in ResultGrid.errors
            raise _ReportedError(result.error or "the run failed")

    def _tell_cost(self, result: RunResult) -> None:
        """Once, what a run of this config costs: the prior of later trials' probe runs. Not
        from a restored run, whose setup paid the restore besides."""
        if self.cost_told or self.restored or not result.step_time_s or self.config is None:
            return
        self.cost_told = True
        speed = self.counters.speed
        run_config = self.config.replace(**(speed.settings if speed else {}))
        self.store.observe(run_cost(run_config.to_dict(), result.setup_time_s, result.step_time_s))

    def _begun(self) -> None:
        """The run's process is up (a worker group's rank 0 says what its start took)."""

    def _starved_by(self, result: RunResult) -> str:
        """Why a run that ended ok trained fewer steps than planned ("" if it did not): a
        budget too short even at its probes' speed (or machine load too, when other processes
        kept :data:`LOADED_CORES` busy, which slows probes as well); else steps slower than its
        probes': machine load; else unknown. A run the feasibility check stopped: its kind."""
        planned = result.planned_steps
        if result.status != "ok" or planned is None or result.steps >= planned or self.rejected:
            return ""
        load = self.machine_load_cores
        heavy = load is not None and load >= LOADED_CORES
        loaded = f" ({load_text(load)} while it ran)" if heavy else ""
        speed = self.counters.speed
        plain_ips = speed.plain_images_per_second if speed else math.nan
        batch = result.global_batch_size or result.config.get("batch_size") or math.nan
        probed_step_s = batch / plain_ips if plain_ips else math.nan
        own_step_s = result.step_time_s or math.nan
        budget = result.config.get("time_budget_s")
        if math.isfinite(probed_step_s):
            if budget and planned * probed_step_s > budget:
                return f"budget or machine load{loaded}" if loaded else "budget"
            if own_step_s > probed_step_s:
                return f"machine load{loaded}"
            return "unknown (its steps ran no slower than its probes')"
        # No probe measured it (its knobs came from a verdict shared with other configs, or
        # were not probed): its own steps say whether the budget could hold its steps at all.
        if budget and math.isfinite(own_step_s) and planned * own_step_s > budget:
            if loaded:
                return f"budget or machine load{loaded}"
            return "budget (at the speed it trained: no probe measured it alone)"
        # Nothing timed its steps, but a heavy load measured beside it is a fact worth its figure.
        load_said = f"; {load_text(load)} while it ran" if heavy else ""
        return f"unknown (no probe measured its speed{load_said})"

    def _keep_traceback(self, text: str) -> None:
        """A failed run's traceback in the trial's folder: Ray writes no error.txt for a run
        that ended as a result (kind errored)."""
        try:
            folder = self._trial_dir()
            if folder is not None:
                (Path(folder) / RUN_TRACEBACK_FILE).write_text(text)
        except Exception as exc:  # the record holds the error line anyway
            logger.warning("could not keep the run's traceback: %s", error_line(exc))

    def _trial_dir(self) -> str | None:
        """The trial's folder for its own files: the experiment's own where storage is local.
        Ray 2.60's ``get_trial_dir`` gives a reused process a staging folder never copied to
        the experiment: the phase log of every later trial in a process was lost."""
        context = tune.get_context()
        storage = context.get_storage()  # None outside a trial (a unit test)
        if storage is None or not isinstance(
            storage.storage_filesystem, pyarrow.fs.LocalFileSystem
        ):
            return context.get_trial_dir()
        Path(storage.trial_fs_path).mkdir(parents=True, exist_ok=True)
        return str(storage.trial_fs_path)

    def report_error(self, exc: Exception, *, final: bool) -> None:
        """``final`` (deterministic): with a checkpoint that ends retries."""
        error = str(exc) if isinstance(exc, TunerError) else f"{type(exc).__name__}: {exc}"
        failed = {
            record.STATUS: "error",
            record.ERROR: error.splitlines()[0][:500] if error else "",
        }
        report = self._report(failed, phase="setup", final=True)
        if final:
            self._send(report, state=None, final=True)
        else:  # retried from the last evaluation's checkpoint, which this must not replace
            self._emit(report, None)

    # ---- speed ---------------------------------------------------------------------------

    def _choose_speed(self, base: TrainConfig, config: dict[str, Any]) -> tuple[SpeedChoice, str]:
        context = self.context
        if context.speed_repeats < 1:  # probes off: the plain setting, resting on no key
            choice = SpeedChoice(settings={})
            self.phases.write(
                "speed", source="not probed", keys=[], choice=choice.said(), config={}
            )
            return choice, "not probed"
        start = time.perf_counter()
        prepare(base)  # the process's one-time costs: the trial's setup, not its first probe
        self.counters.engine_time_s += time.perf_counter() - start
        self.phases.write("setup", seconds=round(time.perf_counter() - start, 3))
        device = resolve_device(base.device)
        speed = TrialSpeed(
            cuda=device.type == "cuda",
            device_name=environment(device)["device_name"],
            pinned={f for f in accuracy_neutral_fields() if f in config},
            cores=context.cores,
            threads=context.threads,
            machine=this_machine(),
            max_memory_bytes=context.max_memory_bytes,
            steps=context.probe_steps,
            repeats=context.speed_repeats,
            share=context.probe_share,
        )
        start = time.perf_counter()
        settled = settle_speed(base, speed, self.store, self._on_probe_run)
        self.counters.engine_time_s += time.perf_counter() - start
        self._count_probes(settled)
        return settled.choice, settled.source

    def _count_probes(self, settled: Settled) -> None:
        counters = self.counters
        counters.probe_time_s, counters.probe_wait_s = settled.probe_s, settled.wait_s
        counters.probe_budget_s = settled.budget_s
        counters.speed_cache_age_s = settled.cache_age_s  # of an earlier search's verdict
        counters.train_time_s += self.probe_steps_s  # this trial's own probe steps only
        self.phases.write(
            "speed",
            source=settled.source,
            probe_s=round(settled.probe_s, 3),
            runs=self.probe_runs,  # probe_s is their wall_s summed (report --check adds them)
            wait_s=round(settled.wait_s, 3),
            budget_s=settled.budget_s,
            settings=settled.choice.settings,
            not_probed=settled.choice.not_probed,
            **self._speed_said(settled),
        )

    def _speed_said(self, settled: Settled) -> dict[str, Any]:
        """What the trial's ``speed_choice`` rests on, for the report's record of it: the
        probe-cache keys (as the cache keeps them), the choice's words' fields, and the fields
        of its config that :meth:`SpeedChoice.shared_note` compares with ``measured_on``."""
        choice = settled.choice
        fields = {k: getattr(self.config, k) for k in choice.measured_on if hasattr(self.config, k)}
        keys = [self.store.cache_key(key) for key in settled.keys]
        return {"keys": keys, "choice": choice.said(), "config": fields}

    def _on_probe_run(self, event: dict[str, Any]) -> None:
        if event["event"] == "end":
            self.phases.write("probe", **{k: v for k, v in event.items() if k != "event"})
            self.probe_steps_s += event["steps_s"]
            self.probe_runs += 1
            first = time.time() - event["steps_s"]  # its training loop began then
            self.counters.first_step_unix_s = self.counters.first_step_unix_s or first
        else:
            self.store.tell(f"probing {event['arm']} {event['run']}/{event['of']}")

    # ---- the run -------------------------------------------------------------------------

    def _rejects(self, partial: RunResult) -> bool:
        """The feasibility check: over the memory budget stops the run after its first steps."""
        feasible, reason = judge(partial.to_dict(), max_memory_bytes=self.context.max_memory_bytes)
        self.rejected = not feasible
        self.phases.write("feasibility", steps=partial.steps, feasible=feasible, reason=reason)
        return self.rejected

    def _on_eval(self, progress: Progress) -> None:
        result = progress.result
        self.phases.write("evaluation", step=result.steps, eval_time_s=result.eval_time_s)
        if progress.cut:  # its time budget cut it short: only the final report tells it, so no
            return  # rung compares it, after fewer images, with trials at the rung's images
        self._tell_cost(result)  # at its first evaluation: early stopping may end it next
        running = {
            "engine": time.perf_counter() - self.run_start,
            "train": progress.result.train_time_s,
            "first_step": progress.result.first_step_unix_s,
        }
        report = self._report(progress.result, phase="train", final=False, running=running)
        if self._checkpoint_due():
            self._send(report, state=progress.state_dict())
            self.last_checkpoint = time.perf_counter()
        else:
            self._emit(report, None)

    def _checkpoint_due(self) -> bool:
        last = self.last_checkpoint
        return last is None or time.perf_counter() - last >= self.context.checkpoint_every_s

    def _report(
        self,
        result: RunResult | dict[str, Any],
        *,
        phase: str,
        final: bool,
        running: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One ``tune.report``; ``running``: the engine run in progress, not counted yet."""
        running, counters = running or {}, self.counters
        speed = counters.speed or SpeedChoice(settings={})
        counted = counters.reported() | {
            record.ENGINE_TIME_S: counters.engine_time_s + running.get("engine", 0.0),
            record.TRIAL_TRAIN_TIME_S: counters.train_time_s + running.get("train", 0.0),
            record.TRIAL_FIRST_STEP_UNIX_S: counters.first_step_unix_s or running.get("first_step"),
            record.SPEED_CHOICE: speed.summary() + speed.shared_note(self.config)
            if counters.speed is not None
            else "",
            # What the run used on top of its parameters (the experiment reader merges it).
            record.SPEED_SETTINGS: json.dumps(speed.settings, sort_keys=True),
            record.SPEED_NOT_PROBED: ", ".join(speed.not_probed),
            record.STARVED_BY: self.starved_by if final else "",
            # So far (a trial that early stopping ends sends no final report).
            record.MACHINE_LOAD_CORES: self.machine_load_cores
            if final
            else self.load.other_cores(),
        }
        return record.trial_report(
            result,
            max_memory_bytes=self.context.max_memory_bytes,
            phase=phase,
            node=self.node,
            final=final,
            counters=counted,
            retries=self.retries,
            last_error=self.last_error,
        )

    def _send(
        self, report: dict[str, Any], *, state: dict[str, Any] | None, final: bool = False
    ) -> None:
        # The run in progress counts in its engine time (its train time is in the engine state).
        meta = self.counters.meta() | {record.ENGINE_TIME_S: report[record.ENGINE_TIME_S]}
        if final:
            meta["final_report"] = report
        with tempfile.TemporaryDirectory(prefix="tuner-ckpt-") as folder:
            if state is not None:
                write_state_file(state, Path(folder) / STATE_FILE)
            (Path(folder) / META_FILE).write_text(json.dumps(meta))
            self._emit(report, Path(folder))

    # ---- Ray I/O -------------------------------------------------------------------------

    def _emit(self, report: dict[str, Any], checkpoint: Path | None) -> None:
        saved = None if checkpoint is None else tune.Checkpoint.from_directory(checkpoint)
        tune.report(report, checkpoint=saved)

    def _latest_checkpoint(self) -> Any:
        return tune.get_checkpoint()


def _run_parts(result: RunResult) -> dict[str, Any]:
    parts = ("wall_time_s", "setup_time_s", "warmup_time_s", "train_time_s", "eval_time_s")
    return {
        "status": result.status,
        "steps": result.steps,
        **{k: getattr(result, k) for k in parts},
    }


def _restore(
    checkpoint: Any, *, state: bool = True
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    if checkpoint is None:
        return None, {}
    with checkpoint.as_directory() as folder:
        state_path, meta_path = Path(folder) / STATE_FILE, Path(folder) / META_FILE
        engine_state = read_state_file(state_path) if state and state_path.exists() else None
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    return engine_state, meta


def _trial_id() -> str:
    """This trial's id ("" outside a Tune trial: a unit test, a rank of a worker group)."""
    try:
        return tune.get_context().get_trial_id() or ""
    except Exception:
        return ""


def _node() -> str:
    try:
        return ray.util.get_node_ip_address()
    except Exception:  # outside a Ray worker (unit use): the host name is still useful
        return socket.gethostname()
