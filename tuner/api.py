"""The Python API: one function per ``tuner`` command (the command parses its flags and calls
it: one path, not two). Every error is a :class:`~tuner.errors.TunerError`, never ``SystemExit``.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.experiment import DEFAULT_REPORTS_DIR, DEFAULT_STORAGE
from tuner.experiment.options import SearchOptions, check_name
from tuner.experiment.paths import refuse_unwritable
from tuner.search_result import SearchResult

if TYPE_CHECKING:
    import pandas as pd

    from tuner.engine.result import RunResult
    from tuner.report.audit import Audit
    from tuner.spaces import SearchSpace

BENCHMARKS_DIR = "reports/benchmarks"  # where bench and verify write their reports by default

__all__ = [
    "DEFAULT_REPORTS_DIR",
    "DEFAULT_STORAGE",
    "AblationResult",
    "SearchOptions",
    "SearchResult",
    "ablate",
    "audit",
    "bench",
    "load",
    "report",
    "run_options",
    "search",
    "spaces",
    "train",
    "verify",
]


def search(space: Any, *, report: bool = True, **options: Any) -> SearchResult:
    """Run a search and write its report, as ``tuner search`` does. ``space``: a name, a ``.py``
    file, a module, or an object with ``space()`` (and optionally ``WORKLOADS``,
    ``build_model``, ``build_data``); ``options``: :class:`SearchOptions`' fields."""
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
    """Run the search ``options`` describe; ``given``: the fields the caller set (None: those
    unlike the defaults), which a resume compares with the experiment's own."""
    from tuner.tune.driver import SearchDriver

    return SearchDriver(options, given=given).run()


def train(
    config: TrainConfig | Mapping[str, Any] | None = None,
    *,
    progress_bar: bool = False,
    **settings: Any,
) -> RunResult:
    """One measured training run, as ``tuner train`` does (under torchrun: data-parallel, rank
    0's result the global one); ``settings`` go over ``config``. A run that fails while
    training returns its result with ``status`` ``oom | diverged | error``."""
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
    """Read a finished (or interrupted) experiment, its folder or its name under ``storage``:
    no Ray, files only."""
    from tuner.answer import decide
    from tuner.experiment import load_experiment, resolve_experiment

    path = resolve_experiment(str(experiment), storage=storage or DEFAULT_STORAGE)
    loaded = load_experiment(path)
    state = str(loaded.metadata.get("state") or "finished")
    report = Path(report_dir) if report_dir is not None else None
    return SearchResult(loaded, decide(loaded), report, state)


def report(
    experiment: str | Path, *, storage: str | None = None, out_dir: str | Path | None = None
) -> SearchResult:
    """Write an experiment's report folder (default ``reports/<name>``), as ``tuner report``
    does; a killed driver's leftover Ray processes are ended first."""
    from tuner.experiment import resolve_experiment
    from tuner.experiment.lock import say_leftovers_ended
    from tuner.report import write_report

    path = resolve_experiment(str(experiment), storage=storage or DEFAULT_STORAGE)
    out = Path(out_dir) if out_dir else Path(DEFAULT_REPORTS_DIR) / path.name
    refuse_unwritable(out, given=f"--out {out}")  # before the reading, not at the writing
    say_leftovers_ended(path)  # a killed driver's Ray processes, ended by their recorded PIDs
    loaded = load(path, storage=storage)
    written = write_report(loaded.experiment, loaded.answer, out_dir=out)
    return dataclasses.replace(loaded, report_dir=written)


def audit(
    experiment: str | Path,
    *,
    storage: str | None = None,
    out_dir: str | Path | None = None,
    console: str | None = None,
) -> Audit:
    """Check every claim of an experiment's report (``out_dir``, default ``reports/<name>``),
    of its ``console`` output and of every tracker's files against the trial data, as
    ``tuner report --check`` does; ``experiment`` may also be a report folder alone."""
    from tuner.experiment import REPORT_FILE, resolve_experiment
    from tuner.report.audit import audit as audit_report

    given = Path(experiment)
    if any(given.glob("*.md")) and not any(given.glob("*/params.json")):
        path, report_dir = given, given  # a report folder alone
    else:
        path = resolve_experiment(str(experiment), storage=storage or DEFAULT_STORAGE)
        report_dir = Path(out_dir) if out_dir else Path(DEFAULT_REPORTS_DIR) / path.name
    written = (report_dir / REPORT_FILE).is_file()
    if out_dir and not written:  # named, and no report there: nothing of it could be checked
        raise TunerError(
            f"--out {out_dir}: no report there to check (no {REPORT_FILE}); give the folder the "
            f"report was written to, or write one first (tuner report {experiment} --out "
            f"{out_dir})."
        )
    found = audit_report(path, report_dir=report_dir if written else None, console=console)
    if not written and path != report_dir:  # "every claim checked holds" is of the data alone
        found.notes.append(
            f"no report at {report_dir}: only the experiment's trials and its trackers' files "
            "were checked (--out names the report's folder)"
        )
    return found


def spaces() -> list[SearchSpace]:
    """The search spaces ``tuner search`` knows by name (``tuner spaces``)."""
    from tuner.spaces import list_spaces

    return list_spaces()


def bench(
    *,
    workload: Mapping[str, Any] | None = None,
    steps: int = 20,
    warmup_steps: int = 5,
    repeats: int = 3,
    skip: Sequence[str] = (),
    amp: str | None = None,
    threads: int | None = None,
    out_dir: str | Path | None = BENCHMARKS_DIR,
    log: Callable[[str], Any] = print,
) -> dict[str, Any]:
    """The plain loop vs each speed technique added in turn, interleaved (``tuner bench``),
    written to ``out_dir`` (None: not written); ``workload``: settings over the device's."""
    _before_runs(out_dir, threads)
    import torch

    from tuner.compare.bench import run_benchmark
    from tuner.report.bench import write_bench

    if threads is not None:
        torch.set_num_threads(threads)
    measured = run_benchmark(
        workload=dict(workload) if workload else None,
        steps=steps,
        warmup_steps=warmup_steps,
        repeats=repeats,
        skip=tuple(skip),
        amp=amp,
        log=log,
    )
    if out_dir is not None:
        write_bench(measured, Path(out_dir))
    return measured


def _before_runs(out_dir: str | Path | None, threads: int | None) -> None:
    """What would fail a measurement only once it ran, refused before it runs."""
    if threads is not None and threads < 1:
        raise TunerError(f"--threads {threads} must be 1 or more (or left out: torch's choice).")
    if out_dir is not None:
        refuse_unwritable(Path(out_dir), given=f"--out {out_dir}")


def verify(
    *,
    workload: Mapping[str, Any] | None = None,
    amp: str | None = None,
    steps: int = 50,
    warmup_steps: int = 10,
    repeats: int = 6,
    threads: int | None = None,
    out_dir: str | Path | None = BENCHMARKS_DIR,
    log: Callable[[str], Any] = print,
) -> dict[str, Any]:
    """The fidelity self-check (``tuner bench --verify``): the engine vs a minimal loop, each
    run a fresh process, interleaved; written to ``out_dir`` (None: not written)."""
    _before_runs(out_dir, threads)
    import torch

    from tuner.compare.fidelity import run_verify, verify_config
    from tuner.report.bench import write_verify

    config = verify_config(
        cuda=torch.cuda.is_available(), workload=dict(workload) if workload else None, amp=amp
    )
    measured = run_verify(
        config, steps=steps, warmup_steps=warmup_steps, repeats=repeats, threads=threads, log=log
    )
    if out_dir is not None:
        write_verify(measured, Path(out_dir))
    return measured


@dataclass(frozen=True)
class AblationResult:
    """An ablation's results: one row per step (medians, paired changes), every run, what this
    machine could not run, and the report folder."""

    summary: pd.DataFrame
    runs: pd.DataFrame
    left_out: list[str]
    report_dir: Path


def ablate(
    *,
    name: str = "ablation",
    reports_dir: str | Path | None = None,
    repeats: int = 3,
    amp: str | None = None,
    groups: Sequence[int] = (8, 16, 32),
    skip: Iterable[str] = (),
    norm_model: str | None = None,
    on_plan: Callable[[Sequence[Any]], None] | None = None,
    on_run: Callable[[int, Any, dict[str, Any]], None] | None = None,
    **settings: Any,
) -> AblationResult:
    """The controlled ablation (``tuner ablate``): the technique ladder, the norm comparison and
    (on 2 or more GPUs) DataParallel vs DDP, each step ``repeats`` times, interleaved; the
    report in ``reports_dir/name``. ``on_plan(arms)`` is called before any run, ``on_run(repeat,
    arm, row)`` after each; ``settings`` go over the device's ablation workload."""
    check_name(name)  # the report's folder, refused before the runs, not after them
    root = reports_dir or DEFAULT_REPORTS_DIR
    refuse_unwritable(Path(root) / name, given=f"--reports-dir {root}")
    import torch

    from tuner.compare import ablation as plan
    from tuner.compare import check_repeats
    from tuner.report.ablation import about_lines, write_ablation

    check_repeats(repeats)
    cuda = torch.cuda.is_available() and settings.get("device", "auto") != "cpu"
    base = plan.default_config(cuda=cuda).replace(**_ablation_overrides(settings))
    arms, left_out = plan.plan_ablation(
        base,
        cuda=cuda,
        amp=amp or ("fp16" if cuda else "bf16"),
        groups=groups,
        skip=skip,
        norm_model=norm_model
        or (None if "model" in settings else plan.default_norm_model(cuda=cuda)),
        gpus=torch.cuda.device_count(),
    )
    for line in left_out:
        print(f"left out: {line}", file=sys.stderr)
    if on_plan is not None:
        on_plan(arms)
    runs = plan.run_ablation(arms, repeats=repeats, on_run=on_run)
    summary = plan.summarize(runs, arms)
    out = write_ablation(
        summary,
        runs,
        out_dir=Path(root) / name,
        title=f"Technique ablation: {name}",
        about=about_lines(base, runs, repeats)
        + [f"left out on this device: {x}" for x in left_out],
    )
    return AblationResult(summary, runs, left_out, out)


def _ablation_overrides(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The run settings given, over the device's ablation workload."""
    changes = dict(settings)
    if "model" in settings and "model_kwargs" not in settings:
        changes["model_kwargs"] = {}  # the default model's kwargs do not fit another model
    if settings.get("epochs") is not None and "steps" not in settings:
        changes["steps"] = None  # an epoch budget replaces the default step budget
    return changes
