"""One search's start and stop, owned in one place: :class:`SearchDriver` takes the
experiment's folder (the driver lock), runs the checks before Ray, calls the steps on Ray
(:mod:`tuner.tune.run`) in their order, writes the metadata's end, holds the one handler of
Ctrl-C and SIGTERM (installed once, put back at the end) and says every line of the console
around the steps: the start, a stop in any phase with the command that goes on, the summary,
the report. ``tuner.search()`` and ``tuner search`` run it (:func:`tuner.api.run_options`).

Nothing here imports Ray, torch or pandas before the checks: a usage error answers in about a
second.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from tuner.errors import Terminated, TunerRuntimeError, error_line
from tuner.experiment.options import SearchOptions
from tuner.experiment.paths import ExperimentPaths
from tuner.experiment.start import experiment_paths, start_search
from tuner.tune.preflight import Prepared, check_search

if TYPE_CHECKING:
    from tuner.answer import Answer
    from tuner.experiment import Experiment
    from tuner.tune import cluster
    from tuner.tune.context import SearchContext
    from tuner.tune.run import TrialRecord, Trials

__all__ = ["SearchDriver", "SearchOutcome"]


@dataclasses.dataclass(frozen=True)
class SearchOutcome:
    """Where a search's results are, what happened, and what it found."""

    experiment_dir: Path
    state: str  # finished | interrupted
    records: list[TrialRecord]
    experiment: Experiment  # the folder as read at the end (after re-measurement and effects)
    answer: Answer  # decided once, on ``experiment``
    report_dir: Path | None = None  # None: no report written
    terminated: bool = False  # a SIGTERM stopped it (exit 143, not Ctrl-C's 130)

    @property
    def usable(self) -> int:
        """How many trials can be recommended (kind ok, every objective measured)."""
        return self.answer.candidates


# What a stop says, by the phase it came in (the phases in their order).
_CHECKS, _BEGIN, _TRIALS, _AFTER = "checks", "begin", "trials", "after"


class SearchDriver:
    """One search (or its resume, ``options.resume``) from its options to its report: call
    :meth:`run` once. ``given``: the fields the caller set (None: those unlike the defaults),
    which a resume compares with the experiment's own."""

    def __init__(self, options: SearchOptions, *, given: frozenset[str] | None = None) -> None:
        self.options = options
        self.given = given
        self.paths = experiment_paths(options)
        self.signals: list[int] = []  # the Ctrl-Cs and SIGTERMs this search took
        self._phase = _CHECKS

    def run(self) -> SearchOutcome:
        """Run the search; Ctrl-C or SIGTERM in any phase stops it as the console then says.

        Raises:
            TunerError: a bad space, option, workload or cluster address; another live driver
                on the experiment (before any trial); a runtime error (``TunerRuntimeError``).
            KeyboardInterrupt: Ctrl-C (:class:`~tuner.errors.Terminated`: SIGTERM) before the
                trials ended; the experiment marked interrupted where it had begun.
        """
        began = time.perf_counter()  # --trust-budget's share is of the whole command
        with self._handler():
            try:
                with start_search(self.options, self.paths, given=self.given) as options:
                    return self._checked(check_search(options, self.paths, began))
            except KeyboardInterrupt:
                if self._phase == _CHECKS:  # its checks or Ray's start: nothing written yet
                    print(f"\n{self._not_started()}", flush=True)
                raise

    @contextlib.contextmanager
    def _handler(self) -> Iterator[None]:
        """The one handler of Ctrl-C and SIGTERM for the whole search, the process's own put
        back after it (signal handlers belong to the main thread: an embedding caller's other
        thread keeps its own)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        before = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for signum, handler in before.items():
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """SIGTERM (SLURM, Kubernetes, systemd) does what Ctrl-C does now: inside ``Tuner.fit``,
        Tune's own SIGINT handler (the trials stopped and saved); elsewhere the exception every
        phase stops on, :class:`~tuner.errors.Terminated` for it (exit 143)."""
        self.signals.append(signum)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        now = signal.getsignal(signal.SIGINT)
        if callable(now) and now != self._on_signal:  # Tune's, for the fit
            now(signal.SIGINT, frame)
            return
        raise Terminated

    def _checked(self, prepared: Prepared) -> SearchOutcome:
        """The search, its checks passed and its folder held: Ray, the trials, the end."""
        if prepared.options.mlflow:  # before any trial runs: a search must not start untracked
            from tuner.tune.mlflow_logger import check_tracking_uri

            check_tracking_uri(prepared.options.mlflow)
        from tuner.tune import cluster, run  # Ray's modules load here, after the checks
        from tuner.tune.ray_log import ray_lines_to_file

        with ray_lines_to_file(self.paths.local, verbose=prepared.options.verbose):
            info, existing = run.connect(prepared)
            try:
                outcome = self._on_ray(prepared, info, existing)
            finally:
                if info.is_local:
                    cluster.shutdown()
        if outcome.state != "finished":
            return outcome
        report = None
        if not prepared.options.no_report:
            report = _write_report(outcome, Path(prepared.options.reports_dir) / self.paths.name)
        _log_to_mlflow(outcome, report)
        return dataclasses.replace(outcome, report_dir=report)

    def _on_ray(
        self, prepared: Prepared, info: cluster.ClusterInfo, existing: set[int]
    ) -> SearchOutcome:
        from tuner.experiment.lock import record_helpers
        from tuner.report.console import print_start
        from tuner.tune import run

        search, profile = run.plan_search(prepared, info)
        try:
            self._phase = _BEGIN
            started = time.time()
            metadata, design = run.begin(search, info, profile, prepared.checked)
            print_start(search, profile)
            if metadata.get("warm_start"):
                print(metadata["warm_start"]["summary"], flush=True)
            if info.is_local:  # what a kill -9 of this driver would leave running
                record_helpers(self.paths.local, existing=existing)
            search = dataclasses.replace(
                search, search_only=tuple(metadata.get("search_only_params", ()))
            )
            self._phase = _TRIALS
            trials = run.run_trials(search, design, metadata)
        except KeyboardInterrupt:
            self._stopped_before_the_end()
            raise
        except TunerRuntimeError:  # Ray failed under the trials: they stay resumable
            if self._phase == _TRIALS:
                run.mark_interrupted(self.paths)
            raise
        return self._after(search, trials, metadata, started, prepared.began)

    def _after(
        self,
        search: SearchContext,
        trials: Trials,
        metadata: dict[str, Any],  # as the search started (or resumed)
        started: float,  # time.time() when the search began (after Ray started)
        began: float,  # time.perf_counter() when the command began
    ) -> SearchOutcome:
        """The steps after the trials (Ctrl-C there keeps what finished and goes on to the end),
        the metadata's end, the summary and the report."""
        from tuner.tune import run

        self._phase = _AFTER
        alone = trials.finished and search.plan.max_world_size == 1  # both measure one process
        try:
            trust_s = search.options.trust_limit_s(time.perf_counter() - began)
            after = run.AfterTrials.of(search, alone, trust_s, metadata)
            try:
                after.run()
            except KeyboardInterrupt:
                print(
                    f"\nInterrupted during the {after.step}; what finished before it is kept.",
                    flush=True,
                )
                after.stopped()
            experiment, answer, record = after.result()
        except BaseException:  # a step after the trials failed: the trials stay resumable
            run.mark_interrupted(self.paths)
            raise
        if trials.finished and not alone:
            record["skipped_after_trials"] = "data-parallel trials (both steps measure one process)"
        return self._end(search.options, trials, experiment, answer, record, started)

    def _end(
        self,
        options: SearchOptions,
        trials: Trials,
        experiment: Experiment,
        answer: Answer,
        record: dict[str, Any],
        started: float,
    ) -> SearchOutcome:
        from tuner.experiment import update_metadata
        from tuner.record import ENDED_AT
        from tuner.report.console import print_summary
        from tuner.tune import run
        from tuner.tune.context import now

        paths = self.paths
        state = (
            "finished"
            if trials.finished and not record.get("interrupted_during")
            else "interrupted"
        )
        end = {
            "state": state,
            ENDED_AT: now(),
            "num_trials": len(trials.records),
            **trials.fit,
            **record,
        }
        experiment = experiment.with_effects(update_metadata(paths.local, **end))
        paths.upload()
        resumed = run.resumed(experiment, started, trials.orphans) if options.resume else None
        run.tell_time_to_target_or_warn(experiment, answer, paths)
        print_summary(experiment, answer, paths=paths, state=state, resumed=resumed)
        terminated = signal.SIGTERM in self.signals
        return SearchOutcome(
            paths.local, state, trials.records, experiment, answer, None, terminated
        )

    def _stopped_before_the_end(self) -> None:
        """Ctrl-C or SIGTERM before the trials ended (Tune's start, its restore: before its own
        handler took over): the experiment marked interrupted, the summary so far and the
        exact command that goes on."""
        from tuner.experiment import METADATA_FILE
        from tuner.tune import run

        if (self.paths.local / METADATA_FILE).is_file():
            run.mark_interrupted(self.paths)
        if self._phase == _BEGIN:
            print(f"\nContinue it with:  {self.paths.resume_command()}", flush=True)
            return
        run.close_study(self.paths)
        summary_so_far(self.paths)

    def _not_started(self) -> str:
        """Ctrl-C or SIGTERM before the search began (its checks, Ray's start): nothing was kept
        or changed, and the command that goes on."""
        name = self.paths.name
        if self.options.resume:
            return (
                f"Stopped before {name!r} resumed: it is as it was. "
                f"Continue it with:  {self.paths.resume_command()}"
            )
        return (
            f"Stopped before the search {name!r} started: nothing was kept. "
            "Start it again with the same command."
        )


def summary_so_far(paths: ExperimentPaths) -> None:
    """Ctrl-C before the trials ended: what finished, and the exact command to go on."""
    from tuner.answer import decide
    from tuner.experiment import load_experiment
    from tuner.report.console import print_summary

    with contextlib.suppress(Exception):  # a folder too new to read still gets the command
        experiment = load_experiment(paths.local)
        print_summary(
            experiment, decide(experiment), paths=paths, state="interrupted", resumed=None
        )
        return
    print(f"Continue it with:  {paths.resume_command()}", flush=True)


def _write_report(outcome: SearchOutcome, out_dir: Path) -> Path | None:
    from tuner.report import write_report

    out_dir = out_dir.resolve()
    try:
        write_report(outcome.experiment, outcome.answer, out_dir=out_dir)
    except Exception as exc:  # the search's results stand even when the report fails
        print(
            f"warning: the report failed ({error_line(exc)}); "
            f"run `python -m tuner report {outcome.experiment_dir}` to retry."
        )
        return None
    print(f"Report:            {out_dir / 'report.html'}")
    return out_dir


def _log_to_mlflow(outcome: SearchOutcome, report: Path | None) -> None:
    """With --mlflow (this run's or, on --resume, the experiment's): the recommended config and
    its figures, and the report files, go to the search's parent run. A failing MLflow costs
    nothing but a warning."""
    uri = (outcome.experiment.metadata.get("options") or {}).get("mlflow")
    if not uri:
        return
    from tuner.tune.mlflow_logger import log_report

    try:
        where = log_report(uri, outcome.experiment, outcome.answer, report)
    except Exception as exc:  # the experiment and report folders hold every result anyway
        print(
            f"warning: logging the report to MLflow failed ({error_line(exc)}); the results are "
            f"in {outcome.experiment_dir}."
        )
        return
    print(f"MLflow:            {where}")
