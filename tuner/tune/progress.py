"""Console progress: trials done/total with an ETA, the running trials' step and images/s, a
heartbeat, and the waits after the trials. On a terminal the running trials are one live line.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import ray
from ray.tune import Callback

from tuner import record
from tuner.experiment.limits import read_limits
from tuner.tune.retries import attempt_text, failure_line
from tuner.tune.tracking import cut_at_end, trial_outcome
from tuner.units import duration_text, format_bytes

__all__ = ["ProgressPrinter", "describe_params", "wait_with_heartbeat"]

HEARTBEAT_S = 15.0  # a plain line about the running trials when nothing was printed for this long
_ACTIVITY_S = 2.0  # how often the trials' actor is asked what running trials are doing
_LIVE_S = 1.0  # how often the live line on a terminal is redrawn, at most
# A trial that has not reported for this long (and 3 of its usual gaps) shows no live images/s.
_STALE_S = 30.0
# A trial's settings that are not searched, left out of its start line.
_WORKLOAD = {"model", "model_kwargs", "data", "img_size", "max_eval_batches", "seed", "device"}
_RUN_LENGTH = {
    "epochs",
    "images",
    "steps",
    "time_budget_s",
    "eval_every_images",
    "eval_every_s",
    "eval_every_steps",
    "warmup_steps",
    "warmup_fraction",
}
_SKIP = _WORKLOAD | _RUN_LENGTH
_KIND_WIDTH = max(len(kind) for kind in record.KINDS)


class ProgressPrinter(Callback):
    """Prints ``[done/total elapsed, eta] kind trial  img/s  acc  peak`` as trials finish.
    ``done`` counts a resumed search's earlier trials too; ``total`` is read again from the
    metadata at each run (a resume may have raised it)."""

    def __init__(
        self,
        *,
        total: int | None,
        stream: TextIO | None = None,
        experiment_dir: Path | None = None,
        probe_share: float | None = None,
        probes_unbounded: bool = False,
        actor_namespace: str = "",
        time_budget_s: float | None = None,
    ) -> None:
        self.total = total
        self.stream = stream  # None: sys.stdout at print time (Ray pickles this callback)
        self.limits_dir = None if experiment_dir is None else str(experiment_dir)
        self.probe_share = probe_share  # None: no speed probes, or not bounded
        self.probes_unbounded = probes_unbounded
        self.actor_namespace = actor_namespace  # where the running trials' activity is told
        self.time_budget_s = time_budget_s  # the search's (the ETA never passes its end)
        self.setup()

    def setup(self, **info: Any) -> None:
        limits = read_limits(self.limits_dir) if getattr(self, "limits_dir", None) else None
        if limits is not None:
            self.total = limits.sample_budget
        self.start = time.monotonic()
        self.last_line = self.start
        self.last_live = 0.0
        self.started: set[str] = set()  # a trial Ray retries is not started again
        self.ended: set[str] = set()  # ended in this run
        self.ended_before: set[str] = set()  # ended before this run (a resumed search)
        self.running: dict[str, dict[str, Any]] = {}  # trial id -> its latest report
        self.since: dict[str, float] = {}  # trial id -> when it started (monotonic)
        # trial id -> (what it does before its reports: a speed probe's step, its worker group's
        # start; since)
        self.doing: dict[str, tuple[str, float]] = {}
        self.reported: dict[str, float] = {}  # trial id -> when its latest report came (Unix s)
        self.gaps: dict[str, float] = {}  # trial id -> seconds between its last two reports
        self.last_activity = 0.0
        self._asked: Any = None  # the pending ask of the trials' actor (a Ray object ref)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_asked": None}

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._count_before(trials)
        self.running.setdefault(trial.trial_id, {})
        self.since.setdefault(trial.trial_id, time.monotonic())
        if trial.trial_id not in self.started:
            self.started.add(trial.trial_id)
            probes = ""
            if self.probe_share is not None:
                probes = f"  (speed probes: at most {self.probe_share:.0%} of the trials' time)"
            elif self.probes_unbounded:
                probes = "  (speed probes: not bounded)"
            self._print(f"start  {trial.trial_id}  {describe_params(trial.config)}{probes}")

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        self.running[trial.trial_id] = dict(result)
        now, last = time.time(), self.reported.get(trial.trial_id)
        if last is not None:
            self.gaps[trial.trial_id] = now - last
        self.reported[trial.trial_id] = now
        self._live()

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        if not self.running:
            return
        self._ask_activity()
        if time.monotonic() - self.last_line >= HEARTBEAT_S and not _is_terminal(self._out):
            self._print(f"running {self._running_text()}")
        self._live()

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._finished(trials, trial, crashed=False)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._finished(trials, trial, crashed=True)

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.running[trial.trial_id] = {}  # its last report is not a live speed any more
        what = failure_line(trial)
        self._print(f"retry  {trial.trial_id}  {attempt_text(trial)} from its checkpoint: {what}")

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        """The trials the search's end cut: Ray ends them with no ``on_trial_complete``."""
        ended = self.ended | self.ended_before
        for trial in cut_at_end(trials, started=self.started, ended=ended):
            self._finished(trials, trial, crashed=False, cut=True)

    @property
    def done(self) -> int:
        return len(self.ended | self.ended_before)

    def _count_before(self, trials: list) -> None:
        if not self.ended and not self.ended_before:
            self.ended_before = {t.trial_id for t in trials if t.is_finished()}

    def _finished(self, trials: list, trial: Any, *, crashed: bool, cut: bool = False) -> None:
        self._count_before(trials)
        self.ended_before.discard(trial.trial_id)
        self.ended.add(trial.trial_id)
        self.running.pop(trial.trial_id, None)
        self.since.pop(trial.trial_id, None)
        self.reported.pop(trial.trial_id, None)
        result = trial.last_result or {}
        kind, error = trial_outcome(trial, failed=crashed, cut=cut)
        line = (
            f"{kind:<{_KIND_WIDTH}} {trial.trial_id}"
            f"  {_num(result.get('images_per_second'), '.1f')} img/s"
            f"  acc {_num(result.get('val_accuracy'), '.3f')}"
            f"  peak {format_bytes(result.get('peak_memory_bytes'), digits=0)}"
        )
        # An incomplete trial's last report was not its end: its reason (if any) is not why.
        reason = "" if kind == "incomplete" else result.get(record.INFEASIBLE_REASON) or error
        reason = reason or ("the search ended before it did" if cut else "")
        line += _probe_text(result)
        if reason:
            line += f"  ({str(reason)[:90]})"
        self._print(line)

    def _eta(self, elapsed: float) -> str:
        """From the trials ended in this run, never shorter than a running trial has run, nor
        past the search's end."""
        left = None if self.total is None else self.total - self.done
        if not self.ended or left is None or left <= 0:
            return ""
        per_trial = elapsed / len(self.ended)
        now = time.monotonic()
        running = max((now - t for t in self.since.values()), default=0.0)
        eta = max(per_trial * left, running if left else 0.0)
        if self.time_budget_s is not None:
            eta = min(eta, max(0.0, self.time_budget_s - elapsed))
        return f", eta {duration_text(eta)}"

    def _running_text(self) -> str:
        parts = []
        for trial_id, result in self.running.items():
            doing = self.doing.get(trial_id)
            if doing is not None and not result:  # in its speed probes, before any report
                what, since = doing
                parts.append(f"{trial_id} {what} ({duration_text(time.time() - since)})")
                continue
            parts.append(f"{trial_id} {self._trial_text(trial_id, result, doing)}")
        return "; ".join(parts)

    def _trial_text(
        self, trial_id: str, result: dict[str, Any], doing: tuple[str, float] | None
    ) -> str:
        """A reporting trial's step and images/s; one silent well past its usual gap says how
        long instead, or what it told it is doing since (waiting on a rank)."""
        step = result.get(record.STEP)
        text = f"step {step if step is not None else '-'}"
        now, last = time.time(), self.reported.get(trial_id)
        if doing is not None and last is not None and doing[1] > last:
            return f"{text}, {doing[0]}"
        if last is not None and now - last > max(_STALE_S, 3 * self.gaps.get(trial_id, 0.0)):
            return f"{text}, no report for {duration_text(now - last)}"
        return f"{text} {_num(result.get('images_per_second'), '.1f')} img/s"

    def _ask_activity(self) -> None:
        """Asked of the trials' actor without waiting: Tune's loop must not block."""
        now = time.monotonic()
        namespace = getattr(self, "actor_namespace", "")  # "": a printer an older tuner pickled
        if not namespace or now - self.last_activity < _ACTIVITY_S:
            return
        self.last_activity = now
        try:
            pending = self._asked
            if pending is not None:
                ready, _ = ray.wait([pending], timeout=0)
                if not ready:
                    return
                self.doing = dict(ray.get(pending))
            from tuner.tune.trials_actor import connect_actor

            self._asked = connect_actor(namespace).activity.remote()
        except Exception:  # the console's detail only: an unanswered ask costs this line
            self._asked = None

    def _live(self) -> None:
        now = time.monotonic()
        if not _is_terminal(self._out) or now - self.last_live < _LIVE_S or not self.running:
            return
        self.last_live = now
        text = f"{self._prefix(now - self.start)} running {self._running_text()}"
        self._out.write("\r\033[K" + text[:200])
        self._out.flush()

    def _prefix(self, elapsed: float) -> str:
        total = "?" if self.total is None else str(self.total)
        return f"[{self.done:>3}/{total} {elapsed:6.0f}s{self._eta(elapsed)}]"

    def _print(self, text: str) -> None:
        now = time.monotonic()
        self.last_line = now
        clear = "\r\033[K" if _is_terminal(self._out) else ""
        print(f"{clear}{self._prefix(now - self.start)} {text}", file=self._out, flush=True)

    @property
    def _out(self) -> TextIO:
        return self.stream or sys.stdout


def wait_with_heartbeat(ref: Any, *, what: str, expected_s: float | None) -> Any:
    """``ray.get(ref)``, with a line every ``HEARTBEAT_S``: how long, and about how long left."""
    start = time.monotonic()
    while True:
        ready, _ = ray.wait([ref], timeout=HEARTBEAT_S)
        if ready:
            return ray.get(ref)
        elapsed = time.monotonic() - start
        left = ""
        if expected_s:
            left = f", about {duration_text(max(expected_s - elapsed, 0.0))} left"
            left = left if elapsed < expected_s else ", taking longer than estimated"
        print(f"  ... {what}: {duration_text(elapsed)}{left}", flush=True)


def describe_params(config: dict[str, Any]) -> str:
    return " ".join(
        f"{key}={value:.2e}" if isinstance(value, float) else f"{key}={value}"
        for key, value in config.items()
        if key not in _SKIP
    )


def _probe_text(result: dict[str, Any]) -> str:
    """``  probes 3.1 s of 4.0 s`` (spent of allowed), ``  probes: cache`` or nothing."""
    spent = result.get(record.SPEED_PROBE_TIME_S)
    if not isinstance(spent, int | float) or math.isnan(spent):
        return ""
    if spent == 0 and result.get(record.SPEED_SOURCE) in ("cache", "machine cache"):
        return f"  probes: {result.get(record.SPEED_SOURCE)}"
    allowed = result.get(record.SPEED_PROBE_BUDGET_S)
    of = f" of {allowed:.1f} s" if isinstance(allowed, int | float) and allowed == allowed else ""
    return f"  probes {spent:.1f} s{of}"


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _num(value: Any, spec: str) -> str:
    if not isinstance(value, int | float) or math.isnan(value):
        return "n/a"
    return format(value, spec)
