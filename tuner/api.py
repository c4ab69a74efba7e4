"""The Python API: :func:`search`, :func:`train` and :func:`load`, what the CLI commands run.

``tuner search``, ``tuner train`` and ``tuner report`` parse their flags and call the functions
here (one path, not two); from Python the same options are keyword arguments, and every error
is a :class:`~tuner.errors.TunerError`, never ``SystemExit``. A space is a registry name, a
``.py`` file, an importable module, or an object defined in Python (a notebook's class or
namespace) with ``space()`` and optionally ``WORKLOADS``, ``build_model`` and ``build_data``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.config import TrainConfig
from tuner.errors import TunerError, error_line

if TYPE_CHECKING:
    import pandas as pd

    from tuner.answer import Answer
    from tuner.engine.result import RunResult
    from tuner.experiment import Experiment
    from tuner.tune.options import SearchOptions
    from tuner.tune.run import SearchOutcome

__all__ = ["SearchResult", "load", "run_options", "search", "train"]


@dataclass(frozen=True)
class SearchResult:
    """A search's results: its experiment folder read back, the answer decided on it, and the
    report folder (None: no report written)."""

    experiment: Experiment
    answer: Answer
    report_dir: Path | None
    state: str = "finished"  # finished | interrupted (continue with resume=True)

    @property
    def experiment_dir(self) -> Path:
        return Path(self.experiment.path)

    @property
    def trials(self) -> pd.DataFrame:
        """One row per trial: the same table (columns and dtypes) as ``trials.csv``."""
        return self.experiment.trials

    @property
    def recommended(self) -> TrainConfig | None:
        """The recommended run config (None: no usable trial)."""
        row = self.answer.recommended
        if row is None:
            return None
        from tuner.record import TRIAL_ID

        return self.answer.configs.get(str(row[TRIAL_ID]))

    @property
    def answer_text(self) -> str:
        """The answer in one sentence, as the report's first line gives it."""
        return self.answer.sentence()

    @property
    def usable(self) -> int:
        """How many trials can be recommended."""
        return self.answer.candidates


def search(space: Any, *, report: bool = True, **options: Any) -> SearchResult:
    """Run a search, the report included (``report=False``: none), as ``tuner search`` does.

    Args:
        space: a space name, a ``.py`` file, an importable module's name, or an object with
            ``space()`` (and optionally ``WORKLOADS``, ``build_model``, ``build_data``).
        report: write the report folder (``reports_dir/name``).
        **options: the CLI's options by their field names (:class:`SearchOptions`):
            ``num_samples``, ``name``, ``storage``, ``world_size``, ``overrides`` (``--model``,
            ``--set``...), ...

    Raises:
        TunerError: a bad space, option, workload or user code (before any trial), or a
            runtime error (``TunerRuntimeError``).
    """
    from tuner.tune.options import SearchOptions

    valid = {f.name for f in dataclasses.fields(SearchOptions)} - {"space", "no_report"}
    unknown = sorted(set(options) - valid)
    if unknown:
        raise TunerError(
            f"Unknown search option(s) {', '.join(unknown)}; the options are: "
            f"{', '.join(sorted(valid))}."
        )
    given = {*options, *(("space",) if space else ()), *(() if report else ("no_report",))}
    options_ = SearchOptions(space=_space_ref(space), no_report=not report, **options)
    return run_options(options_, given=frozenset(given))


def _space_ref(space: Any) -> str:
    if isinstance(space, str | Path):
        return str(space)
    from tuner.spaces import space_of

    return space_of(space).ref


def run_options(options: SearchOptions, *, given: frozenset[str] | None = None) -> SearchResult:
    """Run the search ``options`` describe (what :func:`search` and ``tuner search`` call);
    ``given``: the fields the caller set (None: those that differ from the defaults), which a
    resume compares with the experiment's own.

    Raises:
        TunerError: as :func:`search`.
    """
    from tuner.tune.preflight import prepare, said_if_stopped
    from tuner.tune.signals import sigterm_as_ctrl_c

    # SIGTERM as Ctrl-C from here on, Ray's start included; every check that needs no cluster
    # under the driver lock, before Ray's modules load (on a resume: the experiment's own
    # options, what this call may change applied).
    with sigterm_as_ctrl_c(), prepare(options, given=given) as prepared:
        options = prepared.options
        with said_if_stopped(prepared.paths, resume=options.resume):
            from tuner.tune.run import run_search

            if options.mlflow:  # before any trial runs: a search must not start untracked
                from tuner.tune.mlflow_logger import check_tracking_uri

                check_tracking_uri(options.mlflow)
        outcome = run_search(options, prepared=prepared)
    if outcome.state != "finished":
        return SearchResult(outcome.experiment, outcome.answer, None, outcome.state)
    written = None if options.no_report else _write_report(outcome, Path(options.reports_dir))
    _log_to_mlflow(outcome, written)
    return SearchResult(outcome.experiment, outcome.answer, written, outcome.state)


def _write_report(outcome: SearchOutcome, reports_dir: Path) -> Path | None:
    from tuner.report import write_report

    out_dir = (reports_dir / outcome.experiment_dir.name).resolve()
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
            f"warning: logging the report to MLflow failed ({error_line(exc)}); the results are in "
            f"{outcome.experiment_dir}."
        )
        return
    print(f"MLflow:            {where}")


def train(
    config: TrainConfig | Mapping[str, Any] | None = None,
    *,
    progress_bar: bool = False,
    **settings: Any,
) -> RunResult:
    """One measured training run, as ``tuner train`` does (under torchrun: data-parallel, rank
    0's result the global one).

    Args:
        config: a :class:`TrainConfig` or a mapping of its fields (None: the defaults).
        progress_bar: a tqdm bar on stderr.
        **settings: fields over ``config`` (``model="my_module:build_model"``, ``steps=50``).

    Raises:
        TunerError: a bad setting, data, model or user code (nothing trained). A run that fails
            while training returns its result with ``status`` ``oom | diverged | error``.
    """
    import torch

    from tuner.engine import launched_group
    from tuner.engine import train as engine_train

    base = config.to_dict() if isinstance(config, TrainConfig) else dict(config or {})
    run = TrainConfig.from_params({**base, **settings})
    cuda = run.device != "cpu" and torch.cuda.is_available()
    with launched_group(cuda=cuda):  # torchrun: one worker of a data-parallel run
        return engine_train(run, progress_bar=progress_bar)


def load(
    experiment: str | Path, *, storage: str | None = None, report_dir: str | Path | None = None
) -> SearchResult:
    """Read a finished (or interrupted) experiment: no Ray, files only.

    Args:
        experiment: its folder, or its name under ``storage``.
        storage: where experiments live (default ``experiments``).
        report_dir: its report folder, if one was written there.

    Raises:
        TunerError: no such experiment.
    """
    from tuner.answer import decide
    from tuner.experiment import DEFAULT_STORAGE, load_experiment, resolve_experiment

    path = resolve_experiment(str(experiment), storage=storage or DEFAULT_STORAGE)
    loaded = load_experiment(path)
    state = str(loaded.metadata.get("state") or "finished")
    report = Path(report_dir) if report_dir is not None else None
    return SearchResult(loaded, decide(loaded), report, state)
