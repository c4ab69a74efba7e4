"""One search's start and stop, owned in one place (:class:`SearchDriver`): the driver lock,
the checks before Ray, the steps on Ray (:mod:`tuner.tune.run`) in order, the metadata's end,
the one handler of Ctrl-C and SIGTERM, and the console. Ray, torch and pandas load after the
checks.
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
from tuner.experiment import METADATA_FILE, REPORT_HTML_FILE, update_metadata
from tuner.experiment.lock import record_helpers
from tuner.experiment.options import SearchOptions
from tuner.experiment.paths import ExperimentPaths
from tuner.experiment.start import experiment_paths, start_search
from tuner.record import ENDED_AT
from tuner.search_result import SearchResult
from tuner.tune.context import now
from tuner.tune.preflight import Prepared, check_search

if TYPE_CHECKING:
    from tuner.tune import cluster
    from tuner.tune.context import SearchContext
    from tuner.tune.run import Trials

__all__ = ["SearchDriver"]


# The phases, in their order: what a stop in each says and leaves.
_CHECKS, _BEGIN, _TRIALS, _AFTER = "checks", "begin", "trials", "after"


class SearchDriver:
    """One search (or its resume) from its options to its report: call :meth:`run` once.
    ``given``: the fields the caller set (None: those unlike the defaults), which a resume
    compares with the experiment's own."""

    def __init__(self, options: SearchOptions, *, given: frozenset[str] | None = None) -> None:
        self.options = options
        self.given = given
        self.paths = experiment_paths(options)
        self.signals: list[int] = []  # the Ctrl-Cs and SIGTERMs this search took
        self._phase = _CHECKS

    def run(self) -> SearchResult:
        """Run the search; a Ctrl-C or SIGTERM stops it as the console then says.

        Raises:
            TunerError: a bad space, option, workload or cluster address, another live driver
                (before any trial), or a runtime error (``TunerRuntimeError``).
            KeyboardInterrupt: Ctrl-C (:class:`~tuner.errors.Terminated`: SIGTERM) before the
                trials ended.
        """
        began = time.perf_counter()  # --trust-budget's share is of the whole command
        with self._handler():
            try:
                with start_search(self.options, self.paths, given=self.given) as options:
                    return self._checked(check_search(options, self.paths, began))
            except KeyboardInterrupt:
                if self._phase == _CHECKS:  # said here: it may come before the lock
                    self._stopped()
                raise

    @contextlib.contextmanager
    def _handler(self) -> Iterator[None]:
        """The one handler of Ctrl-C and SIGTERM, the process's own put back after (in the main
        thread only, where signal handlers belong)."""
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
        """SIGTERM (SLURM, Kubernetes) does what Ctrl-C does: Tune's SIGINT handler inside the fit,
        elsewhere :class:`~tuner.errors.Terminated`, a ``KeyboardInterrupt`` (exit 143)."""
        self.signals.append(signum)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        sigint = signal.getsignal(signal.SIGINT)
        if callable(sigint) and sigint != self._on_signal:  # Tune's, for the fit
            sigint(signal.SIGINT, frame)
            return
        raise Terminated

    def _checked(self, prepared: Prepared) -> SearchResult:
        if prepared.options.mlflow:  # before any trial runs: a search must not start untracked
            from tuner.tune.mlflow_logger import check_tracking_uri

            check_tracking_uri(prepared.options.mlflow)
        from tuner.tune import cluster, run  # Ray's modules load here, after the checks
        from tuner.tune.ray_log import ray_lines_to_file

        with ray_lines_to_file(self.paths.local, verbose=prepared.options.verbose):
            info, existing = run.connect(prepared)
            try:
                result = self._on_ray(prepared, info, existing)
            finally:
                if info.is_local:
                    cluster.shutdown()
        if result.state != "finished":
            return result
        out = Path(prepared.options.reports_dir) / self.paths.name
        report = None if prepared.options.no_report else _write_report(result, out)
        _log_to_mlflow(result, report)
        return dataclasses.replace(result, report_dir=report)

    def _on_ray(
        self, prepared: Prepared, info: cluster.ClusterInfo, existing: set[int]
    ) -> SearchResult:
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
            only = tuple(metadata.get("search_only_params", ()))
            search = dataclasses.replace(search, search_only=only)
            self._phase = _TRIALS
            trials = run.run_trials(search, design, metadata)
        except KeyboardInterrupt:
            self._stopped()
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
    ) -> SearchResult:
        """The steps after the trials (a Ctrl-C there keeps what finished), the end, the summary."""
        from tuner.report.console import print_summary
        from tuner.tune import run
        from tuner.tune.target_clients import tell_time_to_target

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
        ended = trials.finished and not record.get("interrupted_during")
        state = "finished" if ended else "interrupted"
        end = {"state": state, ENDED_AT: now(), "num_trials": len(trials.trial_ids), **trials.fit}
        experiment = experiment.with_effects(update_metadata(self.paths.local, **end, **record))
        self.paths.upload()
        resumed = run.resumed(experiment, started, trials.orphans) if self.options.resume else None
        tell_time_to_target(
            experiment, answer, study_name=self.paths.name, study_url=self.paths.study_url
        )
        print_summary(experiment, answer, paths=self.paths, state=state, resumed=resumed)
        terminated = signal.SIGTERM in self.signals
        return SearchResult(experiment, answer, state=state, terminated=terminated)

    def _stopped(self) -> None:
        """A stop before the trials ended: before the search began nothing is kept; after, the
        experiment is marked interrupted, with the summary so far and the command that goes on."""
        paths = self.paths
        if self._phase != _CHECKS and (paths.local / METADATA_FILE).is_file():
            from tuner.tune.run import mark_interrupted

            mark_interrupted(paths)
        if self._phase == _TRIALS:
            from tuner.tune.run import close_study

            close_study(paths)
            summary_so_far(paths)
        elif self._phase == _BEGIN:
            print(f"\nContinue it with:  {paths.resume_command()}", flush=True)
        elif self.options.resume:
            print(
                f"\nStopped before {paths.name!r} resumed: it is as it was. "
                f"Continue it with:  {paths.resume_command()}",
                flush=True,
            )
        else:
            print(
                f"\nStopped before the search {paths.name!r} started: nothing was kept. "
                "Start it again with the same command.",
                flush=True,
            )


def summary_so_far(paths: ExperimentPaths) -> None:
    from tuner.answer import decide
    from tuner.experiment import load_experiment  # pandas: not before the checks
    from tuner.report.console import print_summary

    with contextlib.suppress(Exception):  # a folder too new to read still gets the command
        experiment = load_experiment(paths.local)
        print_summary(
            experiment, decide(experiment), paths=paths, state="interrupted", resumed=None
        )
        return
    print(f"Continue it with:  {paths.resume_command()}", flush=True)


def _write_report(result: SearchResult, out_dir: Path) -> Path | None:
    from tuner.report import write_report

    out_dir = out_dir.resolve()
    try:
        write_report(result.experiment, result.answer, out_dir=out_dir)
    except Exception as exc:  # the search's results stand even when the report fails
        print(
            f"warning: the report failed ({error_line(exc)}); "
            f"run `python -m tuner report {result.experiment_dir}` to retry."
        )
        return None
    print(f"Report:            {out_dir / REPORT_HTML_FILE}")
    return out_dir


def _log_to_mlflow(result: SearchResult, report: Path | None) -> None:
    """With --mlflow: the pick and the report to the search's parent run (a failure: a warning)."""
    uri = (result.experiment.metadata.get("options") or {}).get("mlflow")
    if not uri:
        return
    from tuner.tune.mlflow_logger import log_report

    try:
        where = log_report(uri, result.experiment, result.answer, report)
    except Exception as exc:  # the experiment and report folders hold every result anyway
        print(
            f"warning: logging the report to MLflow failed ({error_line(exc)}); the results are "
            f"in {result.experiment_dir}."
        )
        return
    print(f"MLflow:            {where}")
